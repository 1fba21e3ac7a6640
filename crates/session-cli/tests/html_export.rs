//! `export --format html` on the recorded reference data and on hostile text, and `--redact`
//! across every export format: the page is self-contained (no request can leave it), every
//! stored string is escaped, images come only from `data:` URLs, damage is shown where it
//! happened, and redaction never touches the stored files.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::copy_tree;
use common::plant::{run_file, sessions};

const SESSION: &str = "8e66b6d7-b2ff-4b09-8d01-a588020959d5";
const IMAGE_RUN: &str = "812276ce-7f41-4280-92eb-e61a9c795043";
const SHELL_RUN: &str = "3722a0c8-991c-48c5-86ce-efe221e054a4";
const PNG: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAEElEQVR42mMwTjsDRwzEcQA64hZR78rtAAAAAABJRU5ErkJggg==";

fn reference_store() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    copy_tree(&session_test_support::codelia_sessions_dir(), &root);
    (dir, root)
}

fn export(root: &Path, args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["export"];
    all.extend_from_slice(args);
    let o = sessions(root, &all);
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8(o.stderr).unwrap(),
    )
}

/// Every attribute value that names a resource (`src`, `href`, `action`, `srcset`, `poster`,
/// `data`) is a `data:image/` URL or a fragment, and nothing else in the page can make a
/// request: no script, link, object, frame, form, CSS `url()` or `@import`, no `http(s)://`
/// anywhere outside text; the page forbids any other load by its own CSP.
fn assert_self_contained(html: &str) {
    // Every raw `<` opens a real tag (stored text has its `<` escaped); look inside each.
    let mut rest = html;
    while let Some(i) = rest.find('<') {
        let tag_end = rest[i..].find('>').map_or(rest.len(), |e| i + e);
        let tag = &rest[i..tag_end];
        for attr in [
            "src=",
            "href=",
            "action=",
            "srcset=",
            "poster=",
            "data=",
            "formaction=",
        ] {
            for (j, _) in tag.match_indices(attr) {
                if !tag[..j].ends_with(' ') {
                    continue;
                }
                let value = &tag[j + attr.len()..];
                assert!(
                    value.starts_with("\"data:image/") || value.starts_with("\"#"),
                    "resource reference in {tag}"
                );
            }
        }
        let name: String = tag[1..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '/' || *c == '!')
            .collect();
        let name = name.trim_start_matches('/').to_ascii_lowercase();
        assert!(
            ![
                "script", "link", "object", "embed", "iframe", "frame", "form", "base", "audio",
                "video", "source", "svg"
            ]
            .contains(&name.as_str()),
            "<{name}> in the page"
        );
        assert!(
            !tag.to_ascii_lowercase().contains(" on"),
            "event handler attribute in {tag}"
        );
        rest = &rest[tag_end..];
    }
    assert!(!html.contains("http-equiv=\"refresh\""));
    assert!(!html.contains("url("), "CSS url() in the page");
    assert!(!html.contains("@import"), "CSS @import in the page");
    assert!(html.contains(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">"
    ));
}

#[test]
fn html_run_export_shows_turns_images_and_shell_streams() {
    let (_dir, root) = reference_store();
    let (code, html, err) = export(&root, &[IMAGE_RUN, "--format", "html"]);
    assert_eq!(code, 0, "{err}");
    assert!(html.starts_with("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"));
    assert!(html.contains(&format!("<h1>Run {IMAGE_RUN}</h1>")));
    assert!(
        html.contains("<div class=\"entry user\" id=\"L2\">"),
        "one anchor per record"
    );
    assert!(html.contains("この画像は何ですか？ 🤔"));
    assert!(html.contains(&format!(
        "<img class=\"input\" alt=\"image from the input\" src=\"{PNG}\">"
    )));
    assert!(html.contains("<div class=\"who\">Final answer"));
    assert!(html.contains("<strong>Outcome: completed</strong>"));
    assert!(!html.contains("http://") && !html.contains("https://"));
    assert_self_contained(&html);

    let (code, html, _) = export(&root, &[SHELL_RUN, "--format", "html"]);
    assert_eq!(code, 0);
    // The shell tool's JSON result is shown as its command, exit code and stdout text.
    assert!(html.contains("<div><code>$ node src/index.js Dev</code> · exit code 0 · 66 ms</div><pre>Hello, Dev! 👋</pre>"), "{html}");
    assert!(!html.contains("&quot;stdout&quot;"));
    assert!(html.contains("Tool call <code>shell</code>"));
    assert_self_contained(&html);
}

#[test]
fn html_session_export_has_every_run_with_distinct_anchors() {
    let (_dir, root) = reference_store();
    let (code, html, err) = export(&root, &[SESSION, "--format", "html"]);
    assert_eq!(code, 0, "{err}");
    assert!(html.contains(&format!(
        "<h1>Session {SESSION}</h1><p>3 run(s), oldest first.</p>"
    )));
    let runs: Vec<&str> = html
        .match_indices("<h2>Run ")
        .map(|(i, _)| &html[i + 8..i + 44])
        .collect();
    assert_eq!(
        runs,
        ["a16b9591-0eba-4e91-bacf-06435f8b70a3", SHELL_RUN, IMAGE_RUN]
    );
    for k in 1..=3 {
        assert!(html.contains(&format!("id=\"r{k}-L2\"")));
    }
    assert_self_contained(&html);
}

fn line(kind: &str, rest: &str) -> String {
    format!(r#"{{"type":"{kind}","run_id":"run-h","ts":"2026-02-03T12:00:01.000Z",{rest}}}"#)
}

fn hostile_run(root: &Path, tool_output: &str) -> PathBuf {
    let out = serde_json::to_string(tool_output).unwrap();
    run_file(
        root,
        "2026/02/03",
        "run-h.jsonl",
        &[
            r#"{"type":"header","schema_version":1,"run_id":"run-h","session_id":"s-h","started_at":"2026-02-03T12:00:00.000Z","client":{"name":"t","version":"1"}}"#.to_owned(),
            line("run.start", r#""session_id":"s-h","input":{"type":"parts","parts":[{"type":"text","text":"look </div><script>alert('in')</script>"},{"type":"image_url","image_url":{"url":"https://evil.example/track.png"}},{"type":"image_url","image_url":{"url":"data:image/svg+xml;base64,PHN2Zz4="}},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA\" onerror=\"alert(1)"}}]}"#),
            line("agent.event", r#""seq":1,"event":{"type":"tool_call","tool":"shell","tool_call_id":"c1","args":{"command":"cat x"}}"#),
            line("tool.output", &format!(r#""tool":"shell","tool_call_id":"c1","result_raw":{out}"#)),
            "{\"type\":\"agent.event\",\"run_id\":\"run-h\",\"ts\":\"2026-02-03T12:00:01.500Z\",\"seq\":2,\"event\":{\"type\":\"text\",\"content\":\"x\"".to_owned(),
            line("agent.event", r#""seq":3,"event":{"type":"reasoning","content":"a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn"}"#),
            line("run.end", r#""outcome":"completed","final":"<b>done</b> & 'ok'""#),
        ],
    )
}

#[test]
fn html_escapes_hostile_text_and_embeds_only_raster_data_images() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let out =
        "<script>alert(document.cookie)</script>\n<img src=x onerror=alert(1)>\n\u{1b}[2J\u{202e}";
    hostile_run(&root, out);
    let (code, html, err) = export(&root, &["run-h", "--format", "html"]);
    assert_eq!(
        code, 4,
        "the corrupt line makes the export incomplete: {err}"
    );
    assert!(html.contains(
        "<pre>&lt;script&gt;alert(document.cookie)&lt;/script&gt;\n&lt;img src=x onerror=alert(1)&gt;\n\\u001b[2J\\u202e</pre>"
    ), "{html}");
    assert!(html.contains("look &lt;/div&gt;&lt;script&gt;alert(&#39;in&#39;)&lt;/script&gt;"));
    assert!(html.contains("&lt;b&gt;done&lt;/b&gt; &amp; &#39;ok&#39;"));
    // Remote, SVG and malformed image URLs are named as text, never loaded.
    assert!(html.contains("[image not embedded: https://evil.example/track.png]"));
    assert!(html.contains("[image not embedded: data:image/svg+xml;base64,PHN2Zz4=]"));
    assert!(
        html.contains(
            "[image not embedded: data:image/png;base64,AAAA&quot; onerror=&quot;alert(1)]"
        )
    );
    assert!(!html.contains("<img "), "no image embedded: {html}");
    // The corrupt line is shown inline, where it was.
    assert!(html.contains("<div class=\"entry damage\" id=\"L5\"><div class=\"who\">Damage</div>line 5: unreadable record (corrupt), kept as stored in the file and not shown: "), "{html}");
    // Long reasoning is collapsed.
    assert!(html.contains("<details><summary>Reasoning (14 lines, 27 characters)</summary>"));
    assert_self_contained(&html);
    assert!(!html.contains('\u{1b}') && !html.contains('\u{202e}'));
}

const GH: &str = "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789";

#[test]
fn redact_applies_to_every_format_and_leaves_the_store_alone() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let path = hostile_run(
        &root,
        &format!("GITHUB_TOKEN={GH}\nDB_PASSWORD=hunter2\nagain {GH}\nACME-42"),
    );
    let before = std::fs::read(&path).unwrap();
    let pats = dir.path().join("pats.txt");
    std::fs::write(&pats, "# ours\nACME-[0-9]+\n").unwrap();
    for format in ["md", "json", "jsonl", "html"] {
        let (code, out, err) = export(
            &root,
            &[
                "run-h",
                "--format",
                format,
                "--redact",
                "--redact-patterns",
                pats.to_str().unwrap(),
            ],
        );
        assert_eq!(code, 4, "{format}: {err}");
        assert!(
            !out.contains(GH) && !out.contains("hunter2") && !out.contains("ACME-42"),
            "{format}: {out}"
        );
        assert!(
            out.contains("GITHUB_TOKEN=[REDACTED:github-token#1]"),
            "{format}: {out}"
        );
        assert!(out.contains("again [REDACTED:github-token#1]"), "{format}");
        assert!(
            out.contains("DB_PASSWORD=[REDACTED:env-secret#1]"),
            "{format}"
        );
        assert!(out.contains("[REDACTED:pattern#1]"), "{format}");
        if format == "json" || format == "jsonl" {
            for l in out.lines() {
                serde_json::from_str::<serde_json::Value>(l).unwrap();
            }
            assert!(err.contains("no longer byte-exact"), "{err}");
        }
        assert!(err.contains("--redact: "), "{err}");
    }
    // Without --redact the secret is there: the store was not changed.
    let (_, out, _) = export(&root, &["run-h", "--format", "md"]);
    assert!(out.contains(GH));
    assert_eq!(std::fs::read(&path).unwrap(), before);
    // A bad user pattern is a usage error.
    let (code, _, err) = export(
        &root,
        &["run-h", "--format", "md", "--redact-pattern", "(x"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--redact-pattern \"(x\""), "{err}");
}

//! `sessions serve --port 0` on a copy of the recorded reference data: the printed URL, the
//! token/cookie exchange, Host rejection (DNS rebinding), GET only, the security headers on
//! every response, escaping of hostile text, ids checked before any lookup (traversal is a
//! 404), keyset paging equal to `sessions runs`, the live view following a run that is being
//! appended to, and redaction.

#![cfg(feature = "serve")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::copy_tree;
use common::plant::{NOW, run_file, sessions};

const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// A running `sessions serve`, killed when dropped.
struct Serve {
    child: Child,
    host: String,
    token: String,
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

fn start(extra: &[&str], plant: impl FnOnce(&Path)) -> Serve {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    copy_tree(&session_test_support::codelia_sessions_dir(), &root);
    plant(&root);
    let mut child = Command::new(env!("CARGO_BIN_EXE_sessions"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", "/nonexistent-home")
        .env("TZ", "UTC")
        .env("SESSIONS_NOW", NOW)
        .arg("--root")
        .arg(&root)
        .args(["serve", "--port", "0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim_end().to_owned();
    let rest = url.strip_prefix("http://127.0.0.1:").expect(&url);
    let (port, token) = rest.split_once("/?token=").expect(&url);
    assert!(port.parse::<u16>().unwrap() > 0);
    assert_eq!(token.len(), 32, "{url}");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
    Serve {
        child,
        host: format!("127.0.0.1:{port}"),
        token: token.to_owned(),
        _dir: dir,
        root,
    }
}

/// One raw HTTP/1.1 request (`host: None` sends no Host header).
fn raw(s: &Serve, method: &str, path: &str, host: Option<&str>, cookie: bool) -> Resp {
    let mut c = TcpStream::connect(&s.host).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if let Some(h) = host {
        req.push_str(&format!("Host: {h}\r\n"));
    }
    if cookie {
        let port = s.host.rsplit(':').next().unwrap();
        req.push_str(&format!(
            "Cookie: a=b; sessions_token_{port}={}\r\n",
            s.token
        ));
    }
    req.push_str("\r\n");
    c.write_all(req.as_bytes()).unwrap();
    let mut bytes = Vec::new();
    c.read_to_end(&mut bytes).unwrap();
    let text = String::from_utf8(bytes).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap()[9..12].parse().unwrap();
    let headers = lines
        .map(|l| {
            let (k, v) = l.split_once(": ").unwrap();
            (k.to_owned(), v.to_owned())
        })
        .collect();
    Resp {
        status,
        headers,
        body: body.to_owned(),
    }
}

fn get(s: &Serve, path: &str) -> Resp {
    raw(s, "GET", path, Some(&s.host.clone()), true)
}

fn assert_security_headers(r: &Resp) {
    assert_eq!(r.header("Content-Security-Policy"), Some(CSP));
    assert_eq!(r.header("X-Content-Type-Options"), Some("nosniff"));
    assert_eq!(r.header("Referrer-Policy"), Some("no-referrer"));
    assert_eq!(r.header("X-Frame-Options"), Some("DENY"));
    assert_eq!(r.header("Cache-Control"), Some("no-store"));
}

#[test]
fn serve_requires_token_own_host_and_get() {
    let s = start(&[], |_| {});
    let host = s.host.clone();
    // The printed URL sets the cookie and drops the token from the address.
    let r = raw(
        &s,
        "GET",
        &format!("/?token={}&limit=3", s.token),
        Some(&host),
        false,
    );
    assert_eq!(r.status, 303);
    assert_eq!(r.header("Location"), Some("/?limit=3"));
    let port = host.rsplit(':').next().unwrap();
    assert_eq!(
        r.header("Set-Cookie").unwrap(),
        format!(
            "sessions_token_{port}={}; Path=/; HttpOnly; SameSite=Strict",
            s.token
        )
    );
    assert_security_headers(&r);
    // No cookie, or a wrong token: 401.
    assert_eq!(raw(&s, "GET", "/", Some(&host), false).status, 401);
    assert_eq!(
        raw(
            &s,
            "GET",
            "/?token=00000000000000000000000000000000",
            Some(&host),
            false
        )
        .status,
        401
    );
    // Another Host (DNS rebinding), localhost, a missing Host: 403, even with the cookie.
    let hosts = [
        Some("evil.example".to_owned()),
        Some(format!("evil.example:{port}")),
        Some(format!("localhost:{port}")),
        Some(format!("127.0.0.1:{port}.evil.example")),
        None,
    ];
    for h in hosts {
        let r = raw(&s, "GET", "/", h.as_deref(), true);
        assert_eq!(r.status, 403, "{h:?}");
        assert_security_headers(&r);
    }
    // GET only.
    for m in ["POST", "PUT", "DELETE", "HEAD", "OPTIONS"] {
        let r = raw(&s, m, "/", Some(&host), true);
        assert_eq!(r.status, 405, "{m}");
        assert_eq!(r.header("Allow"), Some("GET"));
    }
    for page in ["/", "/sessions", "/stats", "/app.js"] {
        let r = get(&s, page);
        assert_eq!(r.status, 200, "{page}");
        assert_security_headers(&r);
    }
    assert_eq!(
        get(&s, "/app.js").header("Content-Type"),
        Some("text/javascript; charset=utf-8")
    );
    assert_eq!(
        get(&s, "/").header("Content-Type"),
        Some("text/html; charset=utf-8")
    );
}

const HOSTILE: &str = "<script>alert(document.cookie)</script><img src=x onerror=alert(1)>";

fn plant_hostile(root: &Path) {
    let out = serde_json::to_string(HOSTILE).unwrap();
    run_file(
        root,
        "2026/11/30",
        "run-hostile.jsonl",
        &[
            r#"{"type":"header","schema_version":1,"run_id":"run-hostile","session_id":"s-hostile","started_at":"2026-11-30T11:59:00.000Z","client":{"name":"t","version":"1"}}"#.to_owned(),
            format!(r#"{{"type":"run.start","run_id":"run-hostile","session_id":"s-hostile","ts":"2026-11-30T11:59:00.100Z","input":{{"type":"text","text":{out}}}}}"#),
            format!(r#"{{"type":"tool.output","run_id":"run-hostile","ts":"2026-11-30T11:59:01.000Z","tool":"shell","tool_call_id":"c1","result_raw":{out}}}"#),
            r#"{"type":"run.end","run_id":"run-hostile","ts":"2026-11-30T11:59:02.000Z","outcome":"completed"}"#.to_owned(),
        ],
    );
}

#[test]
fn serve_gives_an_unknown_record_its_type_time_and_whole_json() {
    const RUN: &str = "0e0e0e0e-0000-4000-8000-00000000e0e1";
    let note = format!(
        r#"{{"type":"x.acme.note","run_id":"{RUN}","ts":"2026-11-30T10:00:01.500Z","note":"hi","n":[1,2]}}"#
    );
    let wide = format!(
        r#"{{"type":"x.acme.blob","ts":"2026-11-30T10:00:01.700Z","data":"{}"}}"#,
        "a".repeat(300)
    );
    let lines = [
        format!(
            r#"{{"type":"header","schema_version":1,"run_id":"{RUN}","started_at":"2026-11-30T10:00:00.000Z"}}"#
        ),
        format!(
            r#"{{"type":"run.start","run_id":"{RUN}","ts":"2026-11-30T10:00:01.000Z","input":{{"type":"text","text":"go"}}}}"#
        ),
        note.clone(),
        wide.clone(),
        format!(
            r#"{{"type":"run.end","run_id":"{RUN}","ts":"2026-11-30T10:00:02.000Z","outcome":"completed"}}"#
        ),
    ];
    let s = start(&[], |root| {
        run_file(root, "2026/11/30", &format!("{RUN}.jsonl"), &lines);
    });
    let r = get(&s, &format!("/run/{RUN}"));
    assert_eq!(r.status, 200, "{}", r.body);
    // The same entry as `export --format html`: type, time, the compact JSON, not clipped.
    let entry = format!(
        "<div class=\"entry meta\" id=\"L3\"><div class=\"who\"><span class=\"ts\">2026-11-30T10:00:01.500Z</span><a class=\"ln\" href=\"#L3\">line 3</a></div>Record of unknown type <code>x.acme.note</code><pre>{}</pre></div>",
        note.replace('"', "&quot;")
    );
    assert!(r.body.contains(&entry), "{}", r.body);
    assert!(
        r.body
            .contains("Record of unknown type <code>x.acme.blob</code>"),
        "{}",
        r.body
    );
    assert!(r.body.contains(&wide.replace('"', "&quot;")), "{}", r.body);
}

#[test]
fn serve_escapes_stored_text_and_checks_ids_before_lookup() {
    let s = start(&[], plant_hostile);
    let escaped =
        "&lt;script&gt;alert(document.cookie)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;";
    for page in ["/", "/run/run-hostile"] {
        let r = get(&s, page);
        assert_eq!(r.status, 200, "{page}");
        assert!(r.body.contains(escaped), "{page}: {}", r.body);
        assert!(
            !r.body.contains("<script>alert") && !r.body.contains("<img src=x"),
            "{page}"
        );
    }
    // Anchors per record on the transcript.
    let r = get(&s, "/run/812276ce-7f41-4280-92eb-e61a9c795043");
    assert!(r.body.contains("<div class=\"entry user\" id=\"L2\">"));
    assert!(r.body.contains("src=\"data:image/png;base64,iVBORw0KGgo"));
    // The only script a page loads is the same-origin one, on the live view of an open run.
    assert!(!r.body.contains("<script"));
    // Traversal and malformed ids: 404 before any path is built.
    for bad in [
        "/run/..%2f..",
        "/run/..%2F..%2Fstate.db",
        "/run/%2e%2e",
        "/run/.hidden",
        "/run/a%2fb",
        "/run/%00",
        "/run/%zz",
        "/live/..%2fstate.db",
        "/session/..%2f..%2fetc%2fpasswd",
        "/run/../state.db",
        "/run/no-such-run",
        "/session/no-such-session",
        "/nope",
        "/run/a/b",
    ] {
        let r = get(&s, bad);
        assert_eq!(r.status, 404, "{bad}");
        assert_security_headers(&r);
    }
    // A session page: its runs and saved messages.
    let r = get(&s, "/session/8e66b6d7-b2ff-4b09-8d01-a588020959d5");
    assert_eq!(r.status, 200);
    assert!(
        r.body
            .contains("<a href=\"/run/812276ce-7f41-4280-92eb-e61a9c795043\">")
    );
    assert!(r.body.contains("<h2>Saved messages</h2>"));
    // Query text is echoed escaped.
    let r = get(&s, "/?session=%22%3E%3Cscript%3E");
    assert_eq!(r.status, 200);
    assert!(r.body.contains("value=\"&quot;&gt;&lt;script&gt;\""));
    // A bad filter is a 400 page, not a dead server.
    assert_eq!(get(&s, "/?limit=0").status, 400);
    assert_eq!(get(&s, "/?cursor=garbage").status, 400);
    assert_eq!(get(&s, "/").status, 200);
}

#[test]
fn serve_runs_pages_match_the_runs_command() {
    let s = start(&[], |_| {});
    let out = sessions(&s.root, &["runs", "--json", "--limit", "1000"]);
    let want: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["run_id"].as_str().map(str::to_owned)
        })
        .collect();
    assert_eq!(want.len(), 20);
    let mut got = Vec::new();
    let mut next = Some("/?limit=3".to_owned());
    let mut pages = 0;
    while let Some(path) = next {
        let r = get(&s, &path);
        assert_eq!(r.status, 200, "{path}");
        pages += 1;
        for part in r
            .body
            .split("<a href=\"/run/")
            .skip(1)
            .chain(r.body.split("<a href=\"/live/").skip(1))
        {
            got.push(part.split('"').next().unwrap().to_owned());
        }
        next = r
            .body
            .split("<a rel=\"next\" id=\"next\" href=\"")
            .nth(1)
            .map(|rest| rest.split('"').next().unwrap().replace("&amp;", "&"));
        assert!(pages <= 10);
    }
    assert_eq!(pages, 7);
    let mut want_sorted = want.clone();
    want_sorted.sort();
    got.sort();
    assert_eq!(got, want_sorted);
    // A filter carries over to the next page.
    let r = get(&s, "/?session=8e66b6d7-b2ff-4b09-8d01-a588020959d5&limit=2");
    assert_eq!(r.body.matches("<a href=\"/run/").count(), 2);
    let next = r
        .body
        .split("id=\"next\" href=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    assert!(
        next.contains("session=8e66b6d7-b2ff-4b09-8d01-a588020959d5"),
        "{next}"
    );
    let r = get(&s, &next.replace("&amp;", "&"));
    assert_eq!(r.body.matches("<a href=\"/run/").count(), 1);
    assert!(!r.body.contains("id=\"next\""));
}

fn live_line(rest: &str) -> String {
    format!(r#"{{"run_id":"run-live","ts":"2026-11-30T11:59:30.000Z",{rest}}}"#)
}

#[test]
fn serve_live_view_follows_a_run_being_written() {
    let s = start(&[], |root| {
        run_file(
            root,
            "2026/11/30",
            "run-live.jsonl",
            &[
                r#"{"type":"header","schema_version":1,"run_id":"run-live","session_id":"s-live","started_at":"2026-11-30T11:59:29.000Z","client":{"name":"t","version":"1"}}"#.to_owned(),
                live_line(r#""type":"run.start","session_id":"s-live","input":{"type":"text","text":"first words"}"#),
            ],
        );
    });
    let file = s.root.join("2026/11/30/run-live.jsonl");
    let r = get(&s, "/live/run-live");
    assert_eq!(r.status, 200);
    assert!(r.body.contains("<div id=\"live\" data-open=\"1\">"));
    assert!(r.body.contains("<script src=\"/app.js\" defer></script>"));
    assert!(
        r.body
            .contains("<noscript><meta http-equiv=\"refresh\" content=\"3\"></noscript>")
    );
    let f = get(&s, "/live/run-live?fragment=1");
    assert_eq!(f.header("X-Run-Open"), Some("1"));
    assert!(f.body.contains("first words") && !f.body.contains("second words"));
    let mut w = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    writeln!(
        w,
        "{}",
        live_line(
            r#""type":"agent.event","seq":1,"event":{"type":"text","content":"second words"}"#
        )
    )
    .unwrap();
    let f = get(&s, "/live/run-live?fragment=1");
    assert_eq!(f.header("X-Run-Open"), Some("1"));
    assert!(f.body.contains("second words"));
    writeln!(
        w,
        "{}",
        live_line(r#""type":"run.end","outcome":"completed","final":"all done""#)
    )
    .unwrap();
    let f = get(&s, "/live/run-live?fragment=1");
    assert_eq!(f.header("X-Run-Open"), Some("0"));
    assert!(f.body.contains("all done"));
    let r = get(&s, "/live/run-live");
    assert!(r.body.contains("data-open=\"0\"") && !r.body.contains("<script"));
}

#[test]
fn serve_redact_hides_secrets_on_every_page() {
    const GH: &str = "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789";
    let s = start(&["--redact"], |root| {
        run_file(
            root,
            "2026/11/30",
            "run-secret.jsonl",
            &[
                r#"{"type":"header","schema_version":1,"run_id":"run-secret","started_at":"2026-11-30T11:58:00.000Z","client":{"name":"t","version":"1"}}"#.to_owned(),
                format!(r#"{{"type":"run.start","run_id":"run-secret","ts":"2026-11-30T11:58:00.100Z","input":{{"type":"text","text":"use {GH} please"}}}}"#),
                r#"{"type":"run.end","run_id":"run-secret","ts":"2026-11-30T11:58:02.000Z","outcome":"completed"}"#.to_owned(),
            ],
        );
    });
    for page in ["/", "/run/run-secret"] {
        let r = get(&s, page);
        assert!(!r.body.contains(GH), "{page}");
        assert!(
            r.body.contains("use [REDACTED:github-token#1] please"),
            "{page}"
        );
    }
    let stored = std::fs::read_to_string(s.root.join("2026/11/30/run-secret.jsonl")).unwrap();
    assert!(stored.contains(GH));
}

#[test]
fn search_page_marks_matches_escapes_text_and_links_to_the_record() {
    const RUN: &str = "5e0c0000-0000-4000-8000-00000000a001";
    let lines = [
        format!(
            r#"{{"type":"header","schema_version":1,"run_id":"{RUN}","session_id":"5e0c-sess","started_at":"2026-11-20T10:00:00.000Z"}}"#
        ),
        format!(
            r#"{{"type":"run.start","run_id":"{RUN}","ts":"2026-11-20T10:00:01.000Z","input":{{"type":"text","text":"全文検索機能を追加してください"}}}}"#
        ),
        format!(
            r#"{{"type":"tool.output","run_id":"{RUN}","ts":"2026-11-20T10:00:02.000Z","tool":"shell","tool_call_id":"c1","result_raw":"<script>alert(1)</script> needle"}}"#
        ),
    ];
    let s = start(&[], |root| {
        let dir = root.join("2026/11/20");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{RUN}.jsonl")), lines.join("\n") + "\n").unwrap();
    });
    // The form alone.
    let r = get(&s, "/search");
    assert_eq!(r.status, 200);
    assert_security_headers(&r);
    assert!(r.body.contains("<form method=\"get\" action=\"/search\">"));
    // A Japanese phrase inside a longer word, marked; the hit links to its record.
    let offset = lines[0].len() + 1;
    let r = get(&s, "/search?q=%E6%A4%9C%E7%B4%A2%E6%A9%9F%E8%83%BD");
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.body
            .contains("<p class=\"muted\" id=\"summary\">1 hit(s) in 1 run(s)</p>"),
        "{}",
        r.body
    );
    assert!(
        r.body
            .contains("<div class=\"snippet\">全文<mark>検索機能</mark>を追加してください</div>"),
        "{}",
        r.body
    );
    let link = format!("<a class=\"hit\" href=\"/at/{RUN}/{offset}\">user at byte {offset}</a>");
    assert!(r.body.contains(&link), "{}", r.body);
    let r = get(&s, &format!("/at/{RUN}/{offset}"));
    assert_eq!(r.status, 303);
    assert_eq!(
        r.header("Location"),
        Some(format!("/run/{RUN}#L2").as_str())
    );
    let r = get(&s, &format!("/run/{RUN}"));
    assert!(r.body.contains("id=\"L2\""), "{}", r.body);
    // Stored markup is text; the query is echoed escaped.
    let r = get(&s, "/search?q=needle");
    assert!(
        r.body
            .contains("&lt;script&gt;alert(1)&lt;/script&gt; <mark>needle</mark>"),
        "{}",
        r.body
    );
    assert!(!r.body.contains("<script>alert"));
    let r = get(&s, "/search?q=%3Cb%3Ex%22");
    assert_eq!(r.status, 200);
    assert!(r.body.contains("value=\"&lt;b&gt;x&quot;\""), "{}", r.body);
    assert!(r.body.contains("0 hit(s) in 0 run(s)"));
    // No record there, or an id that is not one: 404.
    assert_eq!(get(&s, &format!("/at/{RUN}/{}", offset + 1)).status, 404);
    assert_eq!(get(&s, "/at/..%2f../1").status, 404);
    assert_eq!(get(&s, &format!("/at/{RUN}/x")).status, 404);
}

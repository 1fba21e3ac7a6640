//! `sessions serve [--port N] [--open] [--redact]`: a local, read-only web viewer of the store.
//!
//! A small synchronous HTTP/1.1 server (`tiny_http`) answers one request at a time on the
//! command's own thread, the way every other command works on the store: no async runtime, no
//! shared state between threads. Pages are rendered on the server and read fine with
//! JavaScript off; one same-origin script (`/app.js`) only makes the live view follow a run
//! without reloading the page.
//!
//! Security, because transcripts hold secrets and hostile text:
//! - it binds 127.0.0.1 only and answers only requests whose `Host` is exactly
//!   `127.0.0.1:PORT` (403 otherwise: a DNS-rebinding page has another host name);
//! - a random 128-bit token is required: in the URL printed at start (`/?token=…`), which
//!   sets an HttpOnly, SameSite=Strict cookie and redirects to the same URL without it;
//!   401 without it;
//! - GET only (405 with `Allow: GET` for any other method);
//! - every response carries a strict Content-Security-Policy (`default-src 'none'`, inline
//!   styles, `data:` images, the one script from `'self'`), `X-Content-Type-Options: nosniff`,
//!   `Referrer-Policy: no-referrer`, `Cache-Control: no-store` and `X-Frame-Options: DENY`;
//! - every stored string is escaped by [`crate::support::html`]; ids are checked against a strict
//!   alphabet before any lookup (`/run/..%2f..` is a 404); the store is only read.

use std::fmt::Write as _;

use session_state::{ListQuery, RunCursor, RunQuery};

use crate::Ctx;
use crate::cli::{OutcomeArg, ServeArgs};
use crate::error::{CliError, EXIT_OK};
use crate::redact::Redactor;
use crate::support::html::{Html, escape};
use crate::support::listing::{WorkspaceMatch, bound, display_outcome, fetch, workspace_arg};
use crate::support::open::{open_reading, open_store_read_only, refresh_index, state_err};
use crate::support::store::load_run_file;

/// The Content-Security-Policy of every response.
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; \
     script-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; \
     frame-ancestors 'none'";

/// The one script: makes `/live/<run>` follow the run by fetching the transcript fragment
/// every second while the server says the run is still open (`X-Run-Open: 1`), keeping the
/// view at the bottom when it was there.
const APP_JS: &str = r#"'use strict';
(function () {
  var live = document.getElementById('live');
  if (!live || live.getAttribute('data-open') !== '1') return;
  var last = null;
  function tick() {
    fetch(location.pathname + '?fragment=1', {credentials: 'same-origin', cache: 'no-store'})
      .then(function (r) {
        var open = r.headers.get('X-Run-Open');
        return r.text().then(function (t) {
          var atEnd = window.innerHeight + window.scrollY >= document.body.scrollHeight - 60;
          if (r.ok && t !== last) {
            last = t;
            live.innerHTML = t;
            if (atEnd) window.scrollTo(0, document.body.scrollHeight);
          }
          if (open === '1') setTimeout(tick, 1000);
          else live.setAttribute('data-open', '0');
        });
      })
      .catch(function () { setTimeout(tick, 3000); });
  }
  setTimeout(tick, 1000);
})();
"#;

/// A response before it is sent.
struct Reply {
    status: u16,
    content_type: &'static str,
    body: Vec<u8>,
    extra: Vec<(&'static str, String)>,
}

impl Reply {
    fn html(status: u16, body: String) -> Self {
        Reply {
            status,
            content_type: "text/html; charset=utf-8",
            body: body.into_bytes(),
            extra: Vec::new(),
        }
    }

    fn page(status: u16, title: &str, body: &str) -> Self {
        let nav = "<nav><a href=\"/\">Runs</a><a href=\"/sessions\">Sessions</a><a href=\"/search\">Search</a><a href=\"/stats\">Stats</a></nav>";
        Reply::html(
            status,
            crate::support::html::document(title, None, "", &format!("{nav}{body}")),
        )
    }

    fn error(status: u16, msg: &str) -> Self {
        let title = match status {
            400 => "Bad request",
            401 => "Token required",
            403 => "Forbidden",
            404 => "Not found",
            405 => "Method not allowed",
            _ => "Error",
        };
        Reply::page(
            status,
            title,
            &format!("<h1>{title}</h1><p>{}</p>", escape(msg)),
        )
    }
}

/// The server's fixed facts: where it listens and the token.
struct Server {
    host: String,
    token: String,
    cookie: String,
}

/// A random 128-bit token as 32 hex digits.
fn new_token() -> Result<String, CliError> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| CliError::Usage(format!("no random token: {e}")))?;
    Ok(b.iter().fold(String::new(), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    }))
}

/// Compares without stopping at the first difference.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// Decodes `%XX` and (in a query) `+`; `None` for a malformed escape or text that is not
/// UTF-8.
fn decode(s: &str, plus: bool) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = s.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' if plus => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// Percent-encodes a query value.
fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The query's pairs, decoded (malformed pairs are dropped).
fn query_pairs(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .filter_map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            Some((decode(k, true)?, decode(v, true)?))
        })
        .collect()
}

fn param<'q>(q: &'q [(String, String)], name: &str) -> Option<&'q str> {
    q.iter()
        .find(|(k, v)| k == name && !v.is_empty())
        .map(|(_, v)| v.as_str())
}

/// Whether `id` may name a run or session: 1 to 128 characters from `[A-Za-z0-9._-]`, not
/// starting with a dot. Checked before any lookup, so no path can be built from anything else.
fn valid_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// `sessions serve`: a local, read-only web viewer on 127.0.0.1, until interrupted.
///
/// # Errors
/// Usage (2), not found (3) or data (4), as the command's help describes.
pub(crate) fn run(ctx: &mut Ctx<'_>, args: &ServeArgs) -> Result<i32, CliError> {
    crate::support::open::check_root(ctx)?;
    let mut redactor = if args.redact.on() {
        Some(Redactor::new(
            &args.redact.redact_pattern,
            &args.redact.redact_patterns,
        )?)
    } else {
        None
    };
    let http = tiny_http::Server::http(("127.0.0.1", args.port))
        .map_err(|e| CliError::Usage(format!("cannot listen on 127.0.0.1:{}: {e}", args.port)))?;
    let port = http
        .server_addr()
        .to_ip()
        .map(|a| a.port())
        .ok_or_else(|| CliError::Usage("the server has no TCP address".into()))?;
    let token = new_token()?;
    let server = Server {
        host: format!("127.0.0.1:{port}"),
        cookie: format!("sessions_token_{port}"),
        token,
    };
    let url = format!("http://{}/?token={}", server.host, server.token);
    writeln!(ctx.out, "{url}")?;
    ctx.out.flush()?;
    if args.open {
        open_browser(ctx, &url);
    }
    for req in http.incoming_requests() {
        let reply = answer(ctx, &server, redactor.as_mut(), &req);
        let _ = send(req, reply);
    }
    Ok(EXIT_OK)
}

fn open_browser(ctx: &mut Ctx<'_>, url: &str) {
    let program = if cfg!(target_os = "macos") {
        "open"
    } else if cfg!(windows) {
        "explorer"
    } else {
        "xdg-open"
    };
    if let Err(e) = std::process::Command::new(program)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        ctx.warn(&format!("--open: cannot start {program}: {e}"));
    }
}

fn send(req: tiny_http::Request, reply: Reply) -> std::io::Result<()> {
    let mut resp = tiny_http::Response::from_data(reply.body).with_status_code(reply.status);
    let mut headers: Vec<(&str, String)> = vec![
        ("Content-Type", reply.content_type.to_owned()),
        ("Content-Security-Policy", CSP.to_owned()),
        ("X-Content-Type-Options", "nosniff".to_owned()),
        ("Referrer-Policy", "no-referrer".to_owned()),
        ("X-Frame-Options", "DENY".to_owned()),
        ("Cache-Control", "no-store".to_owned()),
    ];
    headers.extend(reply.extra);
    for (k, v) in headers {
        if let Ok(h) = tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()) {
            resp.add_header(h);
        }
    }
    req.respond(resp)
}

/// Checks the method, `Host` and token, then routes.
fn answer(
    ctx: &mut Ctx<'_>,
    server: &Server,
    redactor: Option<&mut Redactor>,
    req: &tiny_http::Request,
) -> Reply {
    let header = |name: &'static str| {
        req.headers()
            .iter()
            .filter(|h| h.field.equiv(name))
            .map(|h| h.value.as_str().to_owned())
            .collect::<Vec<_>>()
    };
    let hosts = header("Host");
    if hosts.len() != 1 || hosts[0] != server.host {
        return Reply::error(403, "this server answers only requests for its own address");
    }
    if *req.method() != tiny_http::Method::Get {
        let mut r = Reply::error(405, "only GET is allowed");
        r.extra.push(("Allow", "GET".into()));
        return r;
    }
    let (path, query) = req.url().split_once('?').unwrap_or((req.url(), ""));
    let q = query_pairs(query);
    let cookie_ok = header("Cookie").iter().any(|c| {
        c.split(';').any(|kv| {
            kv.trim()
                .split_once('=')
                .is_some_and(|(k, v)| k == server.cookie && same(v, &server.token))
        })
    });
    if let Some(t) = param(&q, "token") {
        if !same(t, &server.token) {
            return Reply::error(401, "wrong token: open the URL `sessions serve` printed");
        }
        // Move the token into a cookie and out of the address bar and history.
        let rest: Vec<String> = q
            .iter()
            .filter(|(k, _)| k != "token")
            .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
            .collect();
        let location = if rest.is_empty() {
            path.to_owned()
        } else {
            format!("{path}?{}", rest.join("&"))
        };
        let mut r = Reply::html(303, String::new());
        r.extra.push(("Location", location));
        r.extra.push((
            "Set-Cookie",
            format!(
                "{}={}; Path=/; HttpOnly; SameSite=Strict",
                server.cookie, server.token
            ),
        ));
        return r;
    }
    if !cookie_ok {
        return Reply::error(
            401,
            "open the URL `sessions serve` printed (it holds the token)",
        );
    }
    let redacting = redactor.is_some();
    let mut h = Html::new(redactor);
    let segs: Vec<&str> = path.split('/').skip(1).collect();
    let id = |s: &str| decode(s, false).filter(|d| valid_id(d));
    let res = match segs.as_slice() {
        [""] | ["runs"] => runs_page(ctx, &mut h, &q),
        ["sessions"] => sessions_page(ctx, &mut h, &q),
        ["stats"] => stats_page(ctx),
        ["search"] => search_page(ctx, &mut h, &q, redacting),
        ["at", r, offset] => match (id(r), offset.parse::<u64>().ok()) {
            (Some(r), Some(offset)) => record_link(ctx, &r, offset),
            _ => Ok(Reply::error(404, "no such record")),
        },
        ["app.js"] => Ok(Reply {
            status: 200,
            content_type: "text/javascript; charset=utf-8",
            body: APP_JS.as_bytes().to_vec(),
            extra: Vec::new(),
        }),
        ["run", r] => match id(r) {
            Some(r) => run_page(ctx, &mut h, &r, false, false),
            None => Ok(Reply::error(404, "no such run")),
        },
        ["live", r] => match id(r) {
            Some(r) => run_page(ctx, &mut h, &r, true, param(&q, "fragment") == Some("1")),
            None => Ok(Reply::error(404, "no such run")),
        },
        ["session", s] => match id(s) {
            Some(s) => session_page(ctx, &mut h, &s),
            None => Ok(Reply::error(404, "no such session")),
        },
        _ => Ok(Reply::error(404, "no such page")),
    };
    res.unwrap_or_else(|e| match e {
        CliError::NotFound(m) => Reply::error(404, &m),
        CliError::Usage(m) => Reply::error(400, &m),
        other => Reply::error(500, &crate::error::one_line(&other)),
    })
}

fn outcome_arg(s: &str) -> Option<OutcomeArg> {
    Some(match s {
        "completed" => OutcomeArg::Completed,
        "error" => OutcomeArg::Error,
        "cancelled" => OutcomeArg::Cancelled,
        "running" => OutcomeArg::Running,
        "crashed" => OutcomeArg::Crashed,
        _ => return None,
    })
}

// RunQuery is non_exhaustive, so it cannot be built with a struct literal outside its crate.
#[allow(clippy::field_reassign_with_default)]
fn runs_page(
    ctx: &mut Ctx<'_>,
    h: &mut Html<'_>,
    q: &[(String, String)],
) -> Result<Reply, CliError> {
    let limit = match param(q, "limit") {
        Some(l) => l
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=1000).contains(n))
            .ok_or_else(|| CliError::Usage("limit: a whole number from 1 to 1000".into()))?,
        None => 50,
    };
    let (store, why) = open_reading(ctx)?;
    refresh_index(ctx, &store)?;
    let mut query = RunQuery::default();
    query.session = param(q, "session").map(str::to_owned);
    query.since = bound(param(q, "since"), ctx.now, &ctx.zone)?;
    query.until = bound(param(q, "until"), ctx.now, &ctx.zone)?;
    let outcomes: Vec<OutcomeArg> = q
        .iter()
        .filter(|(k, _)| k == "outcome")
        .filter_map(|(_, v)| outcome_arg(v))
        .collect();
    let workspace = match param(q, "workspace") {
        Some(w) => Some(WorkspaceMatch::new(&store, &workspace_arg(ctx, w)?)?),
        None => None,
    };
    let store = crate::support::open::answering_store(ctx, store, why)?;
    if let Some(c) = param(q, "cursor") {
        query.after = Some(RunCursor::from_token(c).map_err(state_err)?);
    }
    let root = ctx.root.path.clone();
    let (rows, next) = fetch(
        &store,
        &root,
        query,
        &outcomes,
        workspace.as_ref(),
        limit,
        ctx.now,
    )?;
    let mut b = String::from("<h1>Runs</h1><form method=\"get\" action=\"/\">");
    for (name, label) in [
        ("session", "Session"),
        ("workspace", "Workspace"),
        ("since", "Since"),
        ("until", "Until"),
    ] {
        let _ = write!(
            b,
            "<label>{label} <input name=\"{name}\" value=\"{}\"></label> ",
            h.text(param(q, name).unwrap_or(""))
        );
    }
    b.push_str("<label>Outcome <select name=\"outcome\"><option value=\"\">any</option>");
    for o in ["completed", "error", "cancelled", "running", "crashed"] {
        let sel = if q.iter().any(|(k, v)| k == "outcome" && v == o) {
            " selected"
        } else {
            ""
        };
        let _ = write!(b, "<option{sel}>{o}</option>");
    }
    let _ = write!(
        b,
        "</select></label> <label>Per page <input name=\"limit\" size=\"4\" value=\"{limit}\"></label> <button>Filter</button></form>"
    );
    b.push_str("<table><thead><tr><th>Started</th><th>Run</th><th>Session</th><th>Outcome</th><th>Model</th><th>Tokens</th><th>Input</th></tr></thead><tbody>");
    for (row, outcome) in &rows {
        let run_link = if outcome.as_str() == "running" {
            "live"
        } else {
            "run"
        };
        let session = match &row.session_id {
            Some(s) if valid_id(s) => format!(
                "<a href=\"/session/{}\">{}</a>",
                enc(s),
                h.text(&s.chars().take(8).collect::<String>())
            ),
            Some(s) => h.text(s),
            None => "-".into(),
        };
        let run = if valid_id(&row.run_id) {
            format!(
                "<a href=\"/{run_link}/{}\">{}</a>",
                enc(&row.run_id),
                h.text(&row.run_id)
            )
        } else {
            h.text(&row.run_id)
        };
        let input: String = row
            .first_input
            .as_deref()
            .unwrap_or("")
            .chars()
            .take(120)
            .collect();
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{run}</td><td>{session}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            h.text(row.started_at.as_deref().unwrap_or("-")),
            h.text(outcome.as_str()),
            h.text(row.model_name.as_deref().unwrap_or("-")),
            row.total_tokens,
            h.text(&input)
        );
    }
    b.push_str("</tbody></table>");
    if rows.is_empty() {
        b.push_str("<p>(no runs match)</p>");
    }
    if let Some(n) = next {
        let keep: Vec<String> = q
            .iter()
            .filter(|(k, v)| k != "cursor" && !v.is_empty())
            .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
            .chain(std::iter::once(format!("cursor={}", enc(&n))))
            .collect();
        let _ = write!(
            b,
            "<p><a rel=\"next\" id=\"next\" href=\"/?{}\">Next page</a></p>",
            escape(&keep.join("&"))
        );
    }
    Ok(Reply::page(200, "Runs", &b))
}

fn sessions_page(
    ctx: &mut Ctx<'_>,
    h: &mut Html<'_>,
    q: &[(String, String)],
) -> Result<Reply, CliError> {
    let store = open_store_read_only(ctx)?;
    let mut query = ListQuery::all();
    if let Some(w) = param(q, "workspace") {
        query = query.workspace(workspace_arg(ctx, w)?);
    }
    let page = store.list(&query.limit(1000)).map_err(state_err)?;
    let mut b = String::from(
        "<h1>Sessions</h1><table><thead><tr><th>Updated</th><th>Session</th><th>Messages</th><th>Workspace</th><th>Last user message</th></tr></thead><tbody>",
    );
    for e in &page.entries {
        let s = &e.summary;
        let id = if valid_id(&s.session_id) {
            format!(
                "<a href=\"/session/{}\">{}</a>",
                enc(&s.session_id),
                h.text(&s.session_id)
            )
        } else {
            h.text(&s.session_id)
        };
        let last: String = s
            .last_user_message
            .as_deref()
            .unwrap_or("")
            .chars()
            .take(120)
            .collect();
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{id}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            h.text(s.updated_at.as_str()),
            s.message_count.map(|n| n.to_string()).unwrap_or_default(),
            h.text(s.workspace_root.as_deref().unwrap_or("")),
            h.text(&last)
        );
    }
    b.push_str("</tbody></table>");
    if page.entries.is_empty() {
        b.push_str("<p>(no saved sessions)</p>");
    }
    Ok(Reply::page(200, "Sessions", &b))
}

fn session_page(ctx: &mut Ctx<'_>, h: &mut Html<'_>, id: &str) -> Result<Reply, CliError> {
    // Links name whole ids: no prefix expansion, no `-`.
    let target = crate::support::target::resolve_exact(ctx, id)?
        .ok_or_else(|| CliError::NotFound(format!("no run or session {id}")))?;
    let Some(session) = target.session.clone() else {
        return Err(CliError::NotFound(format!("no session {id}")));
    };
    let mut b = format!("<h1>Session {}</h1><h2>Runs</h2><ul>", h.text(&session));
    for p in &target.paths {
        let rid = crate::support::paths::run_id_of_path(p).unwrap_or_default();
        if valid_id(&rid) {
            let _ = write!(
                b,
                "<li><a href=\"/run/{}\">{}</a></li>",
                enc(&rid),
                h.text(&rid)
            );
        }
    }
    if target.paths.is_empty() {
        b.push_str("<li>(no run files)</li>");
    }
    b.push_str("</ul><h2>Saved messages</h2>");
    match &target.state {
        Some(state) => h.messages(&mut b, state),
        None => b.push_str("<p>(no saved state)</p>"),
    }
    Ok(Reply::page(200, &format!("Session {session}"), &b))
}

fn run_page(
    ctx: &mut Ctx<'_>,
    h: &mut Html<'_>,
    id: &str,
    live: bool,
    fragment: bool,
) -> Result<Reply, CliError> {
    let path = crate::support::store::try_locate_run(ctx, id)?
        .ok_or_else(|| CliError::NotFound(format!("no run {id}")))?;
    let run = load_run_file(&path)?;
    let open = !run.read.has_run_end();
    let mut section = String::new();
    h.run(&mut section, &run, 1, "");
    if fragment {
        let mut r = Reply::html(200, section);
        r.extra
            .push(("X-Run-Open", if open { "1" } else { "0" }.to_owned()));
        return Ok(r);
    }
    let title = format!("Run {id}");
    let mut body = String::new();
    if live {
        let _ = write!(
            body,
            "<p class=\"muted\">Live view: {} <a href=\"/run/{}\">static page</a></p><div id=\"live\" data-open=\"{}\">{section}</div>",
            if open {
                "following the run as it is written."
            } else {
                "the run has ended."
            },
            enc(id),
            u8::from(open)
        );
    } else {
        let _ = write!(
            body,
            "{}{section}",
            if open {
                format!(
                    "<p><a href=\"/live/{}\">Follow this run live</a></p>",
                    enc(id)
                )
            } else {
                String::new()
            }
        );
    }
    let head = if live && open {
        "<noscript><meta http-equiv=\"refresh\" content=\"3\"></noscript><script src=\"/app.js\" defer></script>"
    } else {
        ""
    };
    let nav = "<nav><a href=\"/\">Runs</a><a href=\"/sessions\">Sessions</a><a href=\"/search\">Search</a><a href=\"/stats\">Stats</a></nav>";
    Ok(Reply::html(
        200,
        crate::support::html::document(&title, None, head, &format!("{nav}{body}")),
    ))
}

/// `/search?q=TEXT[&kind=K][&session=ID][&since=T][&until=T]`: the form, and ranked hits
/// grouped per run, each snippet linking to its record in the run's transcript (through
/// `/at/RUN/OFFSET`). Matches are marked with `<mark>`, except under `--redact`, where the
/// snippet is redacted whole and shown unmarked (a mark inside a secret would split it out
/// of the redactor's sight).
fn search_page(
    ctx: &mut Ctx<'_>,
    h: &mut Html<'_>,
    q: &[(String, String)],
    redacting: bool,
) -> Result<Reply, CliError> {
    let text = param(q, "q").unwrap_or("").trim().to_owned();
    let kind = param(q, "kind").filter(|k| !k.is_empty());
    let mut b = String::from("<h1>Search</h1><form method=\"get\" action=\"/search\">");
    let _ = write!(
        b,
        "<label>Text <input name=\"q\" id=\"q\" size=\"40\" value=\"{}\"></label> ",
        h.text(&text)
    );
    b.push_str("<label>Kind <select name=\"kind\"><option value=\"\">any</option>");
    for k in [
        "user",
        "assistant",
        "reasoning",
        "tool-call",
        "tool-output",
        "final",
    ] {
        let sel = if kind == Some(k) { " selected" } else { "" };
        let _ = write!(b, "<option{sel}>{k}</option>");
    }
    b.push_str("</select></label> ");
    for (name, label) in [
        ("session", "Session"),
        ("since", "Since"),
        ("until", "Until"),
    ] {
        let _ = write!(
            b,
            "<label>{label} <input name=\"{name}\" value=\"{}\"></label> ",
            h.text(param(q, name).unwrap_or(""))
        );
    }
    b.push_str("<button>Search</button></form>");
    if text.is_empty() {
        return Ok(Reply::page(200, "Search", &b));
    }
    let mut query = session_state::SearchQuery::new(text.clone());
    query.limit = 50;
    query.session_id = param(q, "session")
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    let millis = |t: Option<&str>| -> Result<Option<i64>, CliError> {
        t.filter(|t| !t.is_empty())
            .map(|t| {
                crate::timefmt::parse_instant(t, ctx.now, &ctx.zone).map(|dt| {
                    i64::try_from(dt.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
                })
            })
            .transpose()
    };
    query.since_ms = millis(param(q, "since"))?;
    query.until_ms = millis(param(q, "until"))?;
    if let Some(k) = kind {
        query.kinds = vec![k.to_owned()];
    }
    let (store, _why) = open_reading(ctx)?;
    let index = if store.is_read_only() {
        session_state::SearchIndex::open_read_only(store.root()).map_err(state_err)?
    } else {
        refresh_index(ctx, &store)?;
        crate::support::open::refresh_search_index(ctx, &store, true)
    };
    let Some(index) = index else {
        b.push_str(
            "<p>This store has no search index (it is read-only and was never searched).</p>",
        );
        return Ok(Reply::page(200, "Search", &b));
    };
    let hits = index.search(&query).map_err(|e| match e {
        session_state::StateError::SearchQuery { .. } => {
            CliError::Usage(crate::error::one_line(&e))
        }
        e => state_err(e),
    })?;
    let groups = crate::support::search_hits::group_by_run(&hits);
    let _ = write!(
        b,
        "<p class=\"muted\" id=\"summary\">{} hit(s) in {} run(s)</p>",
        hits.len(),
        groups.len()
    );
    for (_, run_hits) in &groups {
        let Some(first) = run_hits.first() else {
            continue;
        };
        let heading = if first.run_id.is_empty() {
            "Saved messages".to_owned()
        } else if valid_id(&first.run_id) {
            format!(
                "Run <a href=\"/run/{}\">{}</a>",
                enc(&first.run_id),
                h.text(&first.run_id)
            )
        } else {
            format!("Run {}", h.text(&first.run_id))
        };
        let session = match &first.session_id {
            Some(s) if valid_id(s) => format!(
                " · session <a href=\"/session/{}\">{}</a>",
                enc(s),
                h.text(s)
            ),
            Some(s) => format!(" · session {}", h.text(s)),
            None => String::new(),
        };
        let _ = write!(
            b,
            "<section class=\"hits\"><h2>{heading}</h2><p class=\"muted\">{}{session}</p><ul>",
            h.text(&first.rel_path)
        );
        for hit in run_hits {
            let (plain, marks) = crate::support::search_hits::split_marks(&hit.snippet);
            let snippet = if redacting {
                h.text(&plain)
            } else {
                let chars: Vec<char> = plain.chars().collect();
                let mut out = String::new();
                let mut at = 0usize;
                for (s, e) in marks {
                    let seg: String = chars.get(at..s).unwrap_or_default().iter().collect();
                    let mark: String = chars.get(s..e).unwrap_or_default().iter().collect();
                    let _ = write!(out, "{}<mark>{}</mark>", h.text(&seg), h.text(&mark));
                    at = e;
                }
                let rest: String = chars.get(at..).unwrap_or_default().iter().collect();
                out.push_str(&h.text(&rest));
                out
            };
            let when = hit
                .time_ms
                .map(|ms| {
                    ctx.times(false)
                        .show(session_schema::Timestamp::from_unix_millis(ms).as_str())
                })
                .unwrap_or_default();
            let session_link = hit.session_id.as_deref().filter(|s| valid_id(s));
            let link = if hit.run_id.is_empty()
                && let Some(sid) = session_link
            {
                format!(
                    "<a class=\"hit\" href=\"/session/{}\">{}</a>",
                    enc(sid),
                    h.text(&hit.kind)
                )
            } else if valid_id(&hit.run_id) {
                format!(
                    "<a class=\"hit\" href=\"/at/{}/{}\">{} at byte {}</a>",
                    enc(&hit.run_id),
                    hit.byte_offset,
                    h.text(&hit.kind),
                    hit.byte_offset
                )
            } else {
                h.text(&hit.kind)
            };
            let _ = write!(
                b,
                "<li>{link} <span class=\"muted\">{}</span><div class=\"snippet\">{snippet}</div></li>",
                h.text(&when)
            );
        }
        b.push_str("</ul></section>");
    }
    Ok(Reply::page(200, "Search", &b))
}

/// `/at/RUN/OFFSET`: a redirect to the anchor of the record at that byte offset in the run's
/// transcript (`/run/RUN#L<line>`); 404 when no record starts there.
fn record_link(ctx: &mut Ctx<'_>, id: &str, offset: u64) -> Result<Reply, CliError> {
    let path = crate::support::store::try_locate_run(ctx, id)?
        .ok_or_else(|| CliError::NotFound(format!("no run {id}")))?;
    let run = load_run_file(&path)?;
    let line = run
        .read
        .records
        .iter()
        .find(|r| r.offset == offset)
        .map(|r| r.line)
        .ok_or_else(|| {
            CliError::NotFound(format!("no record of run {id} starts at byte {offset}"))
        })?;
    let mut r = Reply::html(303, String::new());
    r.extra
        .push(("Location", format!("/run/{}#L{line}", enc(id))));
    Ok(r)
}

#[allow(clippy::field_reassign_with_default)]
fn stats_page(ctx: &mut Ctx<'_>) -> Result<Reply, CliError> {
    let (store, why) = open_reading(ctx)?;
    refresh_index(ctx, &store)?;
    let store = crate::support::open::answering_store(ctx, store, why)?;
    let page = store.list_runs(&RunQuery::default()).map_err(state_err)?;
    // Per UTC day: runs, completed, tokens.
    let mut days: std::collections::BTreeMap<String, (u64, u64, u64)> = Default::default();
    for row in &page.runs {
        let day = row
            .started_at
            .as_deref()
            .and_then(|t| t.get(..10))
            .unwrap_or("(unknown)")
            .to_owned();
        let e = days.entry(day).or_default();
        e.0 += 1;
        if display_outcome(row, ctx.now).as_str() == "completed" {
            e.1 += 1;
        }
        e.2 = e.2.saturating_add(row.total_tokens);
    }
    let max = days.values().map(|d| d.2).max().unwrap_or(0).max(1);
    let bar_w = 28u64;
    let width = (days.len() as u64).max(1) * (bar_w + 8) + 60;
    let mut svg = format!(
        "<svg role=\"img\" aria-label=\"Tokens per day\" width=\"{width}\" height=\"220\" viewBox=\"0 0 {width} 220\"><title>Tokens per day</title>"
    );
    for (i, (day, (runs, _, tokens))) in days.iter().enumerate() {
        let hgt = tokens * 160 / max;
        let x = 50 + i as u64 * (bar_w + 8);
        let _ = write!(
            svg,
            "<rect x=\"{x}\" y=\"{}\" width=\"{bar_w}\" height=\"{hgt}\" fill=\"#3b82f6\"><title>{}: {tokens} tokens, {runs} run(s)</title></rect><text x=\"{}\" y=\"200\" font-size=\"9\" text-anchor=\"middle\" fill=\"currentColor\">{}</text>",
            180 - hgt,
            escape(day),
            x + bar_w / 2,
            escape(day.get(5..).unwrap_or(day))
        );
    }
    let _ = write!(
        svg,
        "<text x=\"4\" y=\"24\" font-size=\"10\" fill=\"currentColor\">{max}</text><line x1=\"46\" y1=\"180\" x2=\"{width}\" y2=\"180\" stroke=\"currentColor\"/></svg>"
    );
    let mut b = format!("<h1>Stats</h1><p>Tokens per day (UTC).</p>{svg}");
    b.push_str("<table><thead><tr><th>Day</th><th>Runs</th><th>Completed</th><th>Tokens</th></tr></thead><tbody>");
    for (day, (runs, done, tokens)) in &days {
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{runs}</td><td>{done}</td><td>{tokens}</td></tr>",
            escape(day)
        );
    }
    b.push_str("</tbody></table>");
    Ok(Reply::page(200, "Stats", &b))
}

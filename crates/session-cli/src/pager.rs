//! The pager for long human output (`show`, `history`, `export` and `--help` on a terminal),
//! the way git does it.
//!
//! The pager is `$SESSIONS_PAGER`, else `$PAGER`, else `less -FRX` (quit when the text fits on
//! one screen, pass our colours through, leave the text on the screen); a variable that is set
//! but empty, or `cat`, means no pager. The command line is run by `sh -c` (so `PAGER="less -S"`
//! works), with `LESS=FRX` and `LV=-c` unless they are set. It is started at the first byte of
//! output (a command that fails before printing starts no pager); when it cannot be started the
//! output goes straight to stdout. When the reader quits early (`q` in less), writing fails
//! with a closed pipe, which ends the command quietly with exit status 0
//! ([`crate::CliError::Output`]). Once a pager runs, Ctrl-C (SIGINT, sent to the whole
//! foreground process group) is the pager's: `sessions` no longer dies of it, so the shell does
//! not get the terminal back while the pager still draws on it; the command ends when the
//! reader quits.

use std::io::{self, BufWriter, Write};
use std::process::{Child, ChildStdin, Command, Stdio};

use crate::Env;
use crate::cli::{Cli, Command as Sub};

/// The pager used when neither variable is set.
pub(crate) const DEFAULT_PAGER: &str = "less -FRX";

/// Whether `command` writes output long enough to page (when stdout is a terminal).
pub(crate) fn pages(cli: &Cli) -> bool {
    if cli.no_pager {
        return false;
    }
    match &cli.command {
        Sub::Show(_) | Sub::History(_) => true,
        Sub::Export(a) => a.output.is_none(),
        _ => false,
    }
}

/// The pager command line `env` asks for; `None` for no pager.
pub(crate) fn command_line(env: &Env) -> Option<String> {
    let chosen = ["SESSIONS_PAGER", "PAGER"]
        .into_iter()
        .find(|name| env.is_set(name))
        .map_or(Some(DEFAULT_PAGER), |name| env.get(name));
    let chosen = chosen?.trim();
    (!chosen.is_empty() && chosen != "cat").then(|| chosen.to_owned())
}

/// stdout, or the stdin of a pager started at the first write.
pub(crate) struct Paged<'a> {
    stdout: &'a mut dyn Write,
    state: State,
    /// `LESS` and `LV` to set for the pager (those the environment leaves unset).
    pager_env: Vec<(&'static str, &'static str)>,
}

enum State {
    /// Not written to yet; the pager command line, if any.
    Waiting(Option<String>),
    /// Writing to stdout.
    Direct,
    /// Writing to a pager.
    Paging(Child, BufWriter<ChildStdin>),
}

impl<'a> Paged<'a> {
    /// Output to `stdout` through the pager `command` (`None`: straight to stdout).
    pub(crate) fn new(stdout: &'a mut dyn Write, command: Option<String>, env: &Env) -> Self {
        let pager_env = [("LESS", "FRX"), ("LV", "-c")]
            .into_iter()
            .filter(|(name, _)| !env.is_set(name))
            .collect();
        Paged {
            stdout,
            state: State::Waiting(command),
            pager_env,
        }
    }

    /// Whether a pager is running.
    #[cfg(test)]
    pub(crate) fn is_paging(&self) -> bool {
        matches!(self.state, State::Paging(..))
    }

    fn start(&mut self) {
        let State::Waiting(command) = &self.state else {
            return;
        };
        let Some(command) = command.clone() else {
            self.state = State::Direct;
            return;
        };
        // Before the pager starts: it may be sent Ctrl-C at once.
        let ctrl_c = CtrlC::leave_to_the_pager();
        self.state = match spawn(&command, &self.pager_env) {
            Ok(mut child) => match child.stdin.take() {
                Some(stdin) => State::Paging(child, BufWriter::new(stdin)),
                None => {
                    let _ = child.wait();
                    ctrl_c.restore();
                    State::Direct
                }
            },
            Err(_) => {
                ctrl_c.restore();
                State::Direct
            }
        };
    }

    /// Ends the output: closes the pager's input and waits until the reader quits it.
    pub(crate) fn finish(mut self) {
        let _ = self.flush();
        if let State::Paging(mut child, stdin) = std::mem::replace(&mut self.state, State::Direct) {
            drop(stdin);
            let _ = child.wait();
        }
    }
}

/// What SIGINT does to this process while a pager runs.
struct CtrlC {
    /// When true, SIGINT does what it does by default (ends the process); when false, nothing.
    #[cfg(unix)]
    default: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl CtrlC {
    /// From now on SIGINT does not end the process (for the rest of its life, which ends when
    /// the pager does).
    fn leave_to_the_pager() -> CtrlC {
        #[cfg(unix)]
        {
            use std::sync::Arc;
            use std::sync::atomic::AtomicBool;
            let flag = Arc::new(AtomicBool::new(false));
            let registered = signal_hook::flag::register_conditional_default(
                signal_hook::consts::SIGINT,
                Arc::clone(&flag),
            );
            CtrlC {
                default: registered.ok().map(|_| flag),
            }
        }
        #[cfg(not(unix))]
        CtrlC {}
    }

    /// SIGINT ends the process again (no pager could be started).
    fn restore(self) {
        #[cfg(unix)]
        if let Some(flag) = self.default {
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// Starts `command`: a program and its arguments separated by blanks directly (so that a
/// pager that is not installed fails here and the output goes to stdout), anything with shell
/// syntax through `sh -c`.
fn spawn(command: &str, env: &[(&str, &str)]) -> io::Result<Child> {
    let shell_syntax = command.contains(|c: char| "|&;<>()$`\\\"'*?[#~=%\n".contains(c));
    let mut cmd = if cfg!(windows) || !shell_syntax {
        let mut words = command.split_whitespace();
        let mut cmd = Command::new(words.next().unwrap_or(DEFAULT_PAGER));
        cmd.args(words);
        cmd
    } else {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(command);
        cmd
    };
    cmd.envs(env.iter().copied()).stdin(Stdio::piped()).spawn()
}

impl Write for Paged<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        self.start();
        match &mut self.state {
            State::Paging(_, stdin) => stdin.write(buf),
            _ => self.stdout.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.state {
            State::Paging(_, stdin) => stdin.flush(),
            _ => self.stdout.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        Env::from_pairs(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        )
    }

    #[test]
    fn the_pager_is_sessions_pager_then_pager_then_less() {
        assert_eq!(command_line(&env(&[])).as_deref(), Some("less -FRX"));
        assert_eq!(
            command_line(&env(&[("PAGER", "most")])).as_deref(),
            Some("most")
        );
        assert_eq!(
            command_line(&env(&[("PAGER", "most"), ("SESSIONS_PAGER", "less -S")])).as_deref(),
            Some("less -S")
        );
        // Set but empty, or cat: no pager, and no fallback to the next choice.
        assert_eq!(
            command_line(&env(&[("SESSIONS_PAGER", ""), ("PAGER", "most")])),
            None
        );
        assert_eq!(command_line(&env(&[("PAGER", " ")])), None);
        assert_eq!(command_line(&env(&[("SESSIONS_PAGER", "cat")])), None);
        assert_eq!(command_line(&env(&[("PAGER", "cat")])), None);
    }

    #[cfg(unix)]
    #[test]
    fn the_pager_starts_at_the_first_byte_and_gets_everything() {
        let dir = tempfile::tempdir().unwrap();
        let got = dir.path().join("got");
        let mut stdout = Vec::new();
        {
            let cmd = format!(
                "cat > '{}'; echo \"$LESS\" > '{}.less'",
                got.display(),
                got.display()
            );
            let mut p = Paged::new(&mut stdout, Some(cmd), &env(&[]));
            assert!(!p.is_paging());
            p.write_all(b"").unwrap();
            assert!(!p.is_paging());
            write!(p, "line 1\nline 2\n").unwrap();
            assert!(p.is_paging());
            p.finish();
        }
        assert!(stdout.is_empty());
        assert_eq!(std::fs::read_to_string(&got).unwrap(), "line 1\nline 2\n");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("got.less")).unwrap(),
            "FRX\n"
        );
    }

    #[cfg(unix)]
    #[test]
    fn without_a_pager_or_with_one_that_cannot_start_output_goes_to_stdout() {
        for command in [None, Some("no-such-pager-program --flag".to_owned())] {
            let mut stdout = Vec::new();
            {
                let mut p = Paged::new(&mut stdout, command.clone(), &env(&[]));
                write!(p, "text").unwrap();
                assert!(!p.is_paging(), "{command:?}");
                p.finish();
            }
            assert_eq!(stdout, b"text", "{command:?}");
        }
    }
}

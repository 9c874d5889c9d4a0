//! The HQL shell: reads statements (from a terminal with line editing, a file, or a string),
//! runs them with the [`Executor`] and prints their output, errors and timings.
//!
//! Test mode echoes each input line (leading white space removed) before the output of the
//! statements it completes, puts errors on the output stream in order, and never prints
//! timings, so a script's output can be diffed against a stored expected output.

mod help;

use std::io::{self, BufRead, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use client::Client;

use crate::ast::Statement;
use crate::error::Code;
use crate::exec::{ExecError, Executor};
use crate::parse_statement;

/// How the shell runs.
#[derive(Debug, Clone)]
pub struct ShellOptions {
    /// No prompt; stop at the first error (unless in test mode) with a failure exit code.
    pub batch: bool,
    pub test_mode: bool,
    /// The namespace to start in.
    pub namespace: Option<String>,
    /// LOAD DATA INFILE counts, reports and skips bad lines (ht's addition).
    pub skip_bad_lines: bool,
    /// SELECT prints timestamps as integer nanoseconds (Hypertable's `--timestamp-format
    /// usecs`, which prints nanoseconds despite its name).
    pub raw_timestamps: bool,
    /// The longest line of statements read (and of LOAD DATA INFILE input), without its `\n`.
    pub max_line_bytes: usize,
    /// The longest statement, all its lines together.
    pub max_statement_bytes: usize,
    /// The largest `-f` or `source` file: it is read whole before anything in it runs.
    pub max_script_bytes: u64,
}

/// The default [`ShellOptions::max_script_bytes`].
pub const DEFAULT_MAX_SCRIPT_BYTES: u64 = 1 << 30;

impl Default for ShellOptions {
    fn default() -> Self {
        Self {
            batch: false,
            test_mode: false,
            namespace: None,
            skip_bad_lines: false,
            raw_timestamps: false,
            max_line_bytes: crate::load::DEFAULT_MAX_LINE_BYTES,
            max_statement_bytes: crate::load::DEFAULT_MAX_LINE_BYTES,
            max_script_bytes: DEFAULT_MAX_SCRIPT_BYTES,
        }
    }
}

/// The lines of a stream, each at most `max` bytes and valid UTF-8; an error names the input,
/// the line and (for UTF-8) the column.
pub struct BoundedLines<R> {
    src: R,
    name: String,
    max: usize,
    line_no: u64,
    done: bool,
}

impl<R: BufRead> BoundedLines<R> {
    pub fn new(src: R, name: impl Into<String>, max_line_bytes: usize) -> Self {
        Self {
            src,
            name: name.into(),
            max: max_line_bytes,
            line_no: 0,
            done: false,
        }
    }
}

impl<R: BufRead> Iterator for BoundedLines<R> {
    type Item = io::Result<String>;

    fn next(&mut self) -> Option<io::Result<String>> {
        if self.done {
            return None;
        }
        self.line_no += 1;
        let mut buf = Vec::new();
        // One byte more than the limit, and the `\n`: enough to tell an overlong line.
        let limit = self.max as u64 + 2;
        let bad = |done: &mut bool, msg: String| {
            *done = true;
            Some(Err(io::Error::new(io::ErrorKind::InvalidData, msg)))
        };
        let n = match Read::take(&mut self.src, limit).read_until(b'\n', &mut buf) {
            Ok(n) => n,
            Err(e) => {
                let msg = format!("{}: line {}: {e}", self.name, self.line_no);
                return bad(&mut self.done, msg);
            }
        };
        if n == 0 {
            self.done = true;
            return None;
        }
        if buf.ends_with(b"\n") {
            buf.pop();
            if buf.ends_with(b"\r") {
                buf.pop();
            }
        }
        if buf.len() > self.max {
            let msg = format!(
                "{}: line {} is longer than {} bytes",
                self.name, self.line_no, self.max
            );
            return bad(&mut self.done, msg);
        }
        match String::from_utf8(buf) {
            Ok(s) => Some(Ok(s)),
            Err(e) => {
                let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
                let column = String::from_utf8_lossy(valid).chars().count() + 1;
                let msg = format!(
                    "{}: line {}, column {column}: invalid UTF-8",
                    self.name, self.line_no
                );
                bad(&mut self.done, msg)
            }
        }
    }
}

/// Reads a whole script file (`-f`, `source`) as lines, before any of it runs: a file that is
/// not valid UTF-8, has an overlong line or is too large runs not at all.
pub fn read_script(path: &Path, opts: &ShellOptions) -> Result<Vec<String>, String> {
    let name = path.display().to_string();
    let f = std::fs::File::open(path).map_err(|e| format!("cannot open '{name}': {e}"))?;
    let mut lines = Vec::new();
    let mut total = 0u64;
    let src = io::BufReader::new(f).take(opts.max_script_bytes.saturating_add(1));
    for line in BoundedLines::new(src, name.clone(), opts.max_line_bytes) {
        let line = line.map_err(|e| format!("{e}; nothing of '{name}' was run"))?;
        total += line.len() as u64 + 1;
        if total > opts.max_script_bytes {
            return Err(format!(
                "'{name}' is larger than {} bytes; nothing of it was run",
                opts.max_script_bytes
            ));
        }
        lines.push(line);
    }
    Ok(lines)
}

/// Everything `ht shell` takes on its command line.
#[derive(Debug, Clone, Default)]
pub struct ShellConfig {
    pub options: ShellOptions,
    /// `-e`: statements to run.
    pub execute: Option<String>,
    /// `-f`: a file of statements to run.
    pub command_file: Option<PathBuf>,
    /// The database the statements run against (the binary wires it: the embedded database on
    /// a data directory, or a cluster); `None` runs nothing and fails.
    pub database: Option<Database>,
}

/// How the shell reaches its database: `connect` opens it, `what` names it in an error
/// (`cannot open the database in './ht-data'`, `cannot connect to the cluster`).
#[derive(Clone, Debug)]
pub struct Database {
    pub what: String,
    pub connect: Connect,
}

/// Opens a client; the error says why it could not.
#[derive(Clone)]
pub struct Connect(pub Arc<dyn Fn() -> Result<Arc<dyn Client>, String> + Send + Sync>);

impl std::fmt::Debug for Connect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Connect(..)")
    }
}

/// Whether to keep reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// `quit`, or the end of the input.
    Quit,
    /// An error in batch mode.
    Failed,
}

/// `source` may nest this deep.
const MAX_SOURCE_DEPTH: usize = 16;

/// Shell commands that need no `;` when alone on a line.
const SHELL_WORDS: &[&str] = &[
    "quit", "exit", "help", "\\h", "?", "clear", "print", "pause", "source",
];

/// Collects lines into statements ending with `;` outside quotes.
#[derive(Debug, Default)]
struct Splitter {
    buf: String,
    quote: Option<char>,
}

impl Splitter {
    fn pending(&self) -> bool {
        !self.buf.trim().is_empty()
    }

    /// Adds a line; returns the statements it completes.
    fn push_line(&mut self, line: &str) -> Vec<String> {
        let mut done = Vec::new();
        if !self.pending() && self.quote.is_none() {
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                return done;
            }
            let first = t
                .split(|c: char| c.is_whitespace() || c == ';')
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            let first = if t.starts_with("\\h") {
                "\\h"
            } else if t.starts_with('?') {
                "?"
            } else {
                first.as_str()
            };
            if SHELL_WORDS.contains(&first) && !t.contains(';') {
                done.push(t.to_string());
                return done;
            }
        }
        let mut chars = line.char_indices().peekable();
        let mut start = 0;
        let mut prev_space = true;
        while let Some((i, c)) = chars.next() {
            match self.quote {
                Some(q) => {
                    if c == '\\' {
                        chars.next();
                    } else if c == q {
                        self.quote = None;
                    }
                }
                None => match c {
                    '\'' | '"' => self.quote = Some(c),
                    '#' if prev_space => {
                        // A comment to the end of the line.
                        self.buf.push_str(&line[start..i]);
                        start = line.len();
                        break;
                    }
                    ';' => {
                        self.buf.push_str(&line[start..=i]);
                        start = i + 1;
                        let stmt = std::mem::take(&mut self.buf);
                        if !stmt.trim().trim_end_matches(';').trim().is_empty() {
                            done.push(stmt.trim().to_string());
                        }
                    }
                    _ => {}
                },
            }
            prev_space = c.is_whitespace();
        }
        self.buf.push_str(&line[start.min(line.len())..]);
        if self.pending() || self.quote.is_some() {
            self.buf.push('\n');
        } else {
            self.buf.clear();
        }
        done
    }

    /// What is left at the end of the input (a statement without `;`).
    fn finish(&mut self) -> Option<String> {
        self.quote = None;
        let s = std::mem::take(&mut self.buf);
        (!s.trim().is_empty()).then(|| s.trim().to_string())
    }
}

/// A shell session over one database.
pub struct Shell {
    exec: Executor,
    opts: ShellOptions,
    /// Failed statements so far.
    errors: u64,
    depth: usize,
}

impl Shell {
    /// A session; enters `opts.namespace` if given.
    pub fn new(
        client: Arc<dyn Client>,
        opts: ShellOptions,
    ) -> Result<Self, crate::exec::ExecError> {
        let mut exec = Executor::new(client);
        exec.set_skip_bad_lines(opts.skip_bad_lines);
        exec.set_raw_timestamps(opts.raw_timestamps);
        exec.set_load_limits(crate::load::LoadLimits {
            max_line_bytes: opts.max_line_bytes,
            ..Default::default()
        });
        if let Some(ns) = &opts.namespace {
            exec.execute(&Statement::Use(ns.clone()), &mut io::sink())?;
        }
        Ok(Self {
            exec,
            opts,
            errors: 0,
            depth: 0,
        })
    }

    /// The executor (for the current namespace, and LOAD's stdin setting).
    pub fn executor_mut(&mut self) -> &mut Executor {
        &mut self.exec
    }

    /// True once any statement has failed.
    pub fn had_error(&self) -> bool {
        self.errors > 0
    }

    /// Runs the statements in `text`.
    pub fn run_script(&mut self, text: &str, out: &mut dyn Write, err: &mut dyn Write) -> Flow {
        self.run_lines(text.lines().map(|l| Ok(l.to_string())), out, err)
    }

    /// Runs the statements of a stream of lines.
    pub fn run_lines(
        &mut self,
        lines: impl Iterator<Item = io::Result<String>>,
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> Flow {
        let mut split = Splitter::default();
        for (n, line) in lines.enumerate() {
            let line = match line {
                Ok(l) => l,
                Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                    // BoundedLines names the input and the line.
                    self.report(&e.to_string(), out, err);
                    return Flow::Failed;
                }
                Err(e) => {
                    self.report(&format!("cannot read the input: {e}"), out, err);
                    return Flow::Failed;
                }
            };
            // Hypertable's shell echoes each line, trimmed, except one starting with quit.
            if self.opts.test_mode && !line.trim().starts_with("quit") {
                let _ = writeln!(out, "{}", line.trim());
            }
            let errors = self.errors;
            for stmt in split.push_line(&line) {
                match self.run_statement(&stmt, out, err) {
                    Flow::Continue => {}
                    f => return f,
                }
                // As in Hypertable's shell, a failed statement drops the rest of its line
                // and a statement begun on it.
                if self.errors > errors {
                    split = Splitter::default();
                    break;
                }
            }
            if split.buf.len() > self.opts.max_statement_bytes {
                split = Splitter::default();
                let msg = format!(
                    "the statement ending at line {} is longer than {} bytes; it was not run",
                    n + 1,
                    self.opts.max_statement_bytes
                );
                if self.fail(&msg, out, err) != Flow::Continue {
                    return Flow::Failed;
                }
            }
        }
        if let Some(stmt) = split.finish() {
            return self.run_statement(&stmt, out, err);
        }
        Flow::Continue
    }

    /// Reports a failure of the shell itself (its input, a sourced file, a limit).
    fn report(&mut self, msg: &str, out: &mut dyn Write, err: &mut dyn Write) {
        self.report_coded(Code::IoError, msg, msg, out, err);
    }

    /// Reports a failure: in test mode as Hypertable's shell prints it, on stdout
    /// (`Hypertable CRITICAL - <code text> (<Hypertable's message>)`), else ht's message on
    /// stderr as `Error: ...`.
    fn report_coded(
        &mut self,
        code: Code,
        hypertable: &str,
        msg: &str,
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) {
        self.errors += 1;
        if self.opts.test_mode {
            let _ = writeln!(out, "Hypertable CRITICAL - {} ({hypertable})", code.text());
        } else {
            let _ = out.flush();
            let _ = writeln!(err, "Error: {msg}");
        }
    }

    fn fail(&mut self, msg: &str, out: &mut dyn Write, err: &mut dyn Write) -> Flow {
        self.fail_coded(Code::IoError, msg, msg, out, err)
    }

    fn fail_coded(
        &mut self,
        code: Code,
        hypertable: &str,
        msg: &str,
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> Flow {
        self.report_coded(code, hypertable, msg, out, err);
        if self.opts.batch && !self.opts.test_mode {
            Flow::Failed
        } else {
            Flow::Continue
        }
    }

    /// Parses and runs one statement or shell command.
    pub fn run_statement(&mut self, text: &str, out: &mut dyn Write, err: &mut dyn Write) -> Flow {
        let stmt = match parse_statement(text) {
            Ok(s) => s,
            Err(e) => {
                let msg = e.to_string();
                return self.fail_coded(e.code(), &e.hypertable_message(), &msg, out, err);
            }
        };
        match stmt {
            Statement::Quit => Flow::Quit,
            Statement::Help(topic) => match help::text(topic.as_deref()) {
                Some(t) => {
                    let _ = out.write_all(t.as_bytes());
                    Flow::Continue
                }
                None => {
                    // Hypertable's answer: output, not an error.
                    let _ = writeln!(out, "\nno help for '{}'", topic.unwrap_or_default());
                    Flow::Continue
                }
            },
            Statement::Source(file) => self.source(&file, out, err),
            Statement::Clear => {
                if !self.opts.test_mode {
                    let _ = out.write_all(b"\x1b[2J\x1b[H");
                }
                Flow::Continue
            }
            Statement::Print(text) => {
                let _ = writeln!(out, "{}", text.unwrap_or_default());
                Flow::Continue
            }
            Statement::Pause(d) => {
                let _ = out.flush();
                std::thread::sleep(d);
                Flow::Continue
            }
            stmt => {
                let started = Instant::now();
                let r = self.exec.execute(&stmt, out);
                let _ = out.flush();
                match r {
                    Ok(()) => {
                        // Notes go with the messages: stdout keeps only the result.
                        for note in &self.exec.summary().notes {
                            if self.opts.test_mode {
                                let _ = writeln!(out, "Note: {note}");
                            } else {
                                let _ = writeln!(err, "Note: {note}");
                            }
                        }
                        if !self.opts.test_mode {
                            let s = self.exec.summary();
                            if let Some(cells) = s.cells {
                                let _ = writeln!(
                                    err,
                                    "  Elapsed time:  {:.2} s\n   Total cells:  {cells}",
                                    started.elapsed().as_secs_f64()
                                );
                            }
                            if let Some(r) = &s.report {
                                let _ = writeln!(err, "{r}");
                            }
                        } else if let Some(r) = self
                            .exec
                            .summary()
                            .report
                            .as_ref()
                            .filter(|r| r.skipped_lines > 0)
                        {
                            // Test mode: a load prints nothing, as in Hypertable, unless
                            // --skip-bad-lines skipped lines: then its counts and the lines.
                            let _ = writeln!(
                                out,
                                "Loaded {} cells from {} lines; {} lines skipped",
                                r.cells, r.lines, r.skipped_lines
                            );
                            for sample in &r.skipped_samples {
                                let _ = writeln!(out, "  skipped {sample}");
                            }
                        }
                        if matches!(stmt, Statement::Shutdown) {
                            return Flow::Quit;
                        }
                        Flow::Continue
                    }
                    // The reader went away (`ht shell ... | head`): stop quietly.
                    Err(ExecError::Io { source, .. })
                        if source.kind() == io::ErrorKind::BrokenPipe =>
                    {
                        Flow::Quit
                    }
                    Err(e) => {
                        let (code, hypertable) = e.hypertable();
                        self.fail_coded(code, &hypertable, &e.to_string(), out, err)
                    }
                }
            }
        }
    }

    fn source(&mut self, file: &str, out: &mut dyn Write, err: &mut dyn Write) -> Flow {
        if self.depth >= MAX_SOURCE_DEPTH {
            let msg = format!("cannot source '{file}': nested more than {MAX_SOURCE_DEPTH} deep");
            return self.fail(&msg, out, err);
        }
        let lines = match read_script(Path::new(file), &self.opts) {
            Ok(l) => l,
            Err(e) => return self.fail(&e, out, err),
        };
        self.depth += 1;
        let flow = self.run_lines(lines.into_iter().map(Ok), out, err);
        self.depth -= 1;
        match flow {
            Flow::Quit => Flow::Continue,
            f => f,
        }
    }

    /// Reads statements from the terminal with line editing and history until quit or EOF.
    pub fn run_interactive(&mut self, history: Option<&Path>) -> Flow {
        let mut editor = match rustyline::DefaultEditor::new() {
            Ok(e) => e,
            Err(e) => {
                eprintln!("Error: cannot start line editing: {e}");
                return Flow::Failed;
            }
        };
        if let Some(h) = history {
            let _ = editor.load_history(h);
        }
        println!("Welcome to the ht shell. Type 'help' for the statements, 'quit' to leave.");
        let mut split = Splitter::default();
        let mut flow = Flow::Continue;
        loop {
            let prompt = if split.pending() { "    -> " } else { "ht> " };
            match editor.readline(prompt) {
                Ok(line) => {
                    let _ = editor.add_history_entry(line.as_str());
                    let stdout = io::stdout();
                    let mut out = stdout.lock();
                    let mut err = io::stderr();
                    for stmt in split.push_line(&line) {
                        flow = self.run_statement(&stmt, &mut out, &mut err);
                        if flow == Flow::Quit {
                            break;
                        }
                    }
                    if flow == Flow::Quit {
                        break;
                    }
                }
                Err(rustyline::error::ReadlineError::Interrupted) => {
                    split = Splitter::default();
                }
                Err(_) => {
                    flow = Flow::Quit;
                    break;
                }
            }
        }
        if let Some(h) = history {
            let _ = editor.save_history(h);
        }
        flow
    }
}

/// `ht shell`: opens the database and runs statements; returns the exit code.
pub fn run(config: &ShellConfig) -> i32 {
    let Some(database) = &config.database else {
        eprintln!("Error: no database to run against");
        return 1;
    };
    let client: Arc<dyn Client> = match (database.connect.0)() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("Error: {}: {e}", database.what);
            return 1;
        }
    };
    let mut shell = match Shell::new(client.clone(), config.options.clone()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("Error: {e}");
            return 1;
        }
    };
    let stdin_is_tty = io::stdin().is_terminal();
    let scripted = config.execute.is_some() || config.command_file.is_some();
    // Statements from -e or -f leave standard input to LOAD DATA INFILE "-".
    shell.executor_mut().set_load_io(
        scripted,
        io::stderr().is_terminal() && !config.options.test_mode,
    );
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let mut err = io::stderr();
    let mut flow = Flow::Continue;
    if let Some(text) = &config.execute {
        flow = shell.run_script(text, &mut out, &mut err);
    }
    if flow == Flow::Continue
        && let Some(file) = &config.command_file
    {
        flow = match read_script(file, &config.options) {
            Ok(lines) => shell.run_lines(lines.into_iter().map(Ok), &mut out, &mut err),
            Err(e) => {
                let _ = writeln!(err, "Error: {e}");
                Flow::Failed
            }
        };
    }
    if flow == Flow::Continue && !scripted {
        if stdin_is_tty && !config.options.batch {
            let _ = out.flush();
            let history = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".ht_history"));
            flow = shell.run_interactive(history.as_deref());
        } else {
            let max = config.options.max_line_bytes;
            let lines = BoundedLines::new(io::stdin().lock(), "(stdin)", max);
            flow = shell.run_lines(lines, &mut out, &mut err);
        }
    }
    let _ = out.flush();
    let had_error = shell.had_error();
    drop(shell);
    if let Err(e) = client.close() {
        eprintln!("Error: closing the database: {e}");
        return 1;
    }
    match flow {
        Flow::Failed => 1,
        _ if config.options.batch && had_error => 1,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::Splitter;

    fn split(lines: &[&str]) -> Vec<String> {
        let mut s = Splitter::default();
        let mut out: Vec<String> = lines.iter().flat_map(|l| s.push_line(l)).collect();
        out.extend(s.finish());
        out
    }

    #[test]
    fn statements_end_at_semicolons_outside_quotes() {
        assert_eq!(split(&["a; b;", "c"]), ["a;", "b;", "c"]);
        assert_eq!(split(&["x 'a;b' \"c;\\\"d\";"]), ["x 'a;b' \"c;\\\"d\";"]);
        assert_eq!(
            split(&["select", "  *", "from t;"]),
            ["select\n  *\nfrom t;"]
        );
        assert_eq!(split(&["# c;", "", "a; # b;"]), ["a;"]);
        assert_eq!(split(&["x 'multi", "line;' ;"]), ["x 'multi\nline;' ;"]);
        assert_eq!(split(&["quit"]), ["quit"]);
        assert_eq!(
            split(&["pause 1", "help select"]),
            ["pause 1", "help select"]
        );
        assert_eq!(split(&[";;", "a;"]), ["a;"]);
    }
}

//! Wikitext → plain text: the rules are on [`strip_wikitext`].

mod entities;

use entities::decode_entities;
use memchr::{memchr, memchr2, memmem};

/// Tags removed together with their content (the content is not prose, or is
/// not shown on the article page).
const DROP_CONTENT: &[&str] = &[
    "ref",
    "references",
    "math",
    "chem",
    "ce",
    "gallery",
    "timeline",
    "imagemap",
    "score",
    "graph",
    "mapframe",
    "maplink",
    "templatestyles",
    "templatedata",
    "hiero",
    "inputbox",
    "categorytree",
    "indicator",
    "includeonly",
];

/// Tags whose content is kept literally (not interpreted as wikitext).
const LITERAL: &[&str] = &["nowiki", "pre", "source", "syntaxhighlight"];

/// Inline tags: removed without leaving a space, so "H<sub>2</sub>O" stays
/// one word.
const INLINE: &[&str] = &[
    "a", "abbr", "b", "bdi", "bdo", "big", "cite", "code", "data", "del", "dfn", "em", "font", "i",
    "ins", "kbd", "mark", "q", "s", "samp", "small", "span", "strike", "strong", "sub", "sup",
    "time", "tt", "u", "var",
];

/// Link namespaces whose links are removed entirely (English and German).
const DROP_NAMESPACES: &[&str] = &["file", "image", "datei", "bild", "category", "kategorie"];

/// Deepest `[[` nesting that is tracked; deeper openers are text. Real pages
/// nest two levels (a link in an image caption); the cap bounds the copying.
const MAX_LINK_DEPTH: usize = 16;

/// Strips wikitext markup, leaving plain text.
///
/// This is not a MediaWiki parser: it removes markup so that what is left is
/// the prose a reader sees, closely enough that index terms come from the
/// article and not from its markup. It works in passes, each linear in its
/// input (searches for closers are cached so that a failed search is never
/// repeated, and nesting that needs copying is capped), so any input, however
/// malformed, is stripped in bounded time without panicking.
///
/// The passes, in order (the order matters, see each):
///
/// 1. **Comments and tags**. `<!-- ... -->` is
///    removed (an unclosed comment hides the rest of the page, as in
///    MediaWiki). Tags whose content is not prose are removed with their
///    content: `<ref>` (and `<ref .../>`), `<references>`, `<math>`, `<chem>`,
///    `<gallery>`, `<timeline>`, `<imagemap>`, `<score>`, `<graph>`,
///    `<hiero>`, `<templatestyles>`, `<includeonly>`, ... (the list is
///    `DROP_CONTENT` in the source). An unclosed one (`<ref>` with no
///    `</ref>`) drops only the tag. `<nowiki>`, `<pre>`,
///    `<source>` and `<syntaxhighlight>` keep their content *literally*: it is
///    protected from the later passes. Any other tag is removed and its
///    content kept; inline tags (`<b>`, `<i>`, `<sub>`, `<span>`, ...) vanish
///    without a trace ("H<sub>2</sub>O" → "H2O"), block tags (`<br>`, `<div>`,
///    ...) become a space so words on either side stay apart. A `<` that does
///    not start a well-formed tag is text.
/// 2. **Templates and tables**. `{{...}}` and
///    `{{{...}}}` (nested to any depth) and tables `{| ... |}` (the opener and
///    closer at the start of a line) are removed with everything inside. An
///    opener that is never closed, or a closer that closes nothing, is kept as
///    text, as MediaWiki does, so one stray `{{` does not eat the article.
/// 3. **Links**. `[[target|label]]` → label, `[[target]]` → target
///    (underscores shown as spaces), `[[:Category:X]]` → "Category:X".
///    Links to files, images and categories (`File:`, `Image:`, `Datei:`,
///    `Bild:`, `Category:`, `Kategorie:`, any case) and interlanguage links
///    (`[[de:Köln]]`, a lower-case language code before the colon) are
///    removed entirely, caption and all; `[[Media:x.ogg|label]]` and other
///    interwiki links (`[[wikt:word|word]]`) are shown like any link.
///    Nesting beyond 16 levels of `[[` is text.
///    `[http://x label]` → label, a bare `[http://x]` → nothing (the `]` must
///    be on the same line; `https`, `ftp`, `//`, `mailto:` ... work too).
/// 4. **Lines**. Heading markers (`== Title ==` → "Title"), list
///    and indent markers at the start of a line (`*`, `#`, `:`, `;`),
///    horizontal rules (`----`), behaviour switches (`__TOC__`, `__NOTOC__`,
///    any `__UPPER_CASE__`) and the emphasis quotes `''`, `'''`, `'''''` are
///    removed.
/// 5. **Entities**. The 252 named entities of HTML 4 (`&amp; &lt; &gt;
///    &quot; &nbsp; &ndash; &mdash; &eta; ...`) plus `&apos;` and `&minus;`,
///    decimal `&#123;` and hexadecimal `&#x1F;` references are decoded; spaces
///    (`&nbsp;`, ...) become a plain space, `&shy;` vanishes. Anything else
///    starting with `&` is text. This is last so that text
///    written as entities (`&#123;&#123;`) is never taken for markup.
/// 6. **Whitespace**: runs of spaces are collapsed, lines trimmed, runs of
///    blank lines collapsed to one.
///
/// Never panics, and takes time roughly linear in `src.len()` whatever the
/// input.
///
/// ```
/// let text = wikitext::strip_wikitext(
///     "'''Köln''' is a [[city]] in [[Germany|Deutschland]].<ref>{{cite web|x}}</ref>",
/// );
/// assert_eq!(text, "Köln is a city in Deutschland.");
/// ```
pub fn strip_wikitext(src: &str) -> String {
    let s = tags_and_comments(src);
    let s = templates_and_tables(&s);
    let s = links(&s);
    let s = lines(&s);
    let s = decode_entities(&s);
    tidy_whitespace(&s)
}

/// Finds `needle` at or after a position, for positions that only grow.
///
/// The last answer is cached: a search that found nothing from `p` answers
/// "nothing" for every later position, and a found position answers every
/// query up to it. So the total work over a pass is linear, where searching
/// afresh from every opener would be quadratic on input like `<ref><ref>...`.
struct Next<'a> {
    hay: &'a [u8],
    finder: memmem::Finder<'a>,
    found: Option<usize>,
    none_from: usize,
}

impl<'a> Next<'a> {
    fn new(hay: &'a [u8], needle: &'a [u8]) -> Self {
        Next {
            hay,
            finder: memmem::Finder::new(needle),
            found: None,
            none_from: usize::MAX,
        }
    }

    fn at_or_after(&mut self, p: usize) -> Option<usize> {
        if p >= self.none_from || p > self.hay.len() {
            return None;
        }
        if let Some(f) = self.found
            && f >= p
        {
            return Some(f);
        }
        match self.finder.find(&self.hay[p..]) {
            Some(k) => {
                self.found = Some(p + k);
                self.found
            }
            None => {
                self.none_from = p;
                None
            }
        }
    }
}

/// Pass 1: comments and tags. See [`strip_wikitext`].
fn tags_and_comments(src: &str) -> String {
    let b = src.as_bytes();
    let lower = src.to_ascii_lowercase();
    let lb = lower.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut comment_end = Next::new(b, b"-->");
    let mut next_gt = Next::new(b, b">");
    let mut next_lt = Next::new(b, b"<");
    // One closing-tag finder per tag with content to skip or keep, made on
    // first use.
    let mut closers: Vec<(&'static str, Next<'_>)> = Vec::new();
    let mut i = 0;
    let mut copied = 0;
    while let Some(k) = memchr(b'<', &b[i..]) {
        let lt = i + k;
        i = lt + 1;
        if b[lt..].starts_with(b"<!--") {
            out.push_str(&src[copied..lt]);
            i = match comment_end.at_or_after(lt + 4) {
                Some(e) => e + 3,
                None => b.len(),
            };
            copied = i;
            continue;
        }
        let Some(tag) = parse_tag(lb, lt, &mut next_gt, &mut next_lt) else {
            continue;
        };
        out.push_str(&src[copied..lt]);
        i = tag.end;
        copied = i;
        let name = &lower[tag.name.0..tag.name.1];
        if let Some(&known) = DROP_CONTENT.iter().chain(LITERAL).find(|&&n| n == name) {
            if tag.closing || tag.self_closing {
                continue; // a stray closer or an empty element: nothing to keep
            }
            let closer = closers_for(&mut closers, known, lb);
            let Some((content_end, after)) = find_closing(closer, lb, tag.end) else {
                continue; // unclosed: drop the tag alone, the rest is text
            };
            if LITERAL.contains(&known) {
                if known != "nowiki" {
                    out.push(' ');
                }
                escape_literal(&src[tag.end..content_end], &mut out);
                if known != "nowiki" {
                    out.push(' ');
                }
            }
            i = after;
            copied = i;
        } else if !INLINE.contains(&name) {
            out.push(' ');
        }
    }
    out.push_str(&src[copied.min(b.len())..]);
    out
}

struct Tag {
    /// Byte range of the name.
    name: (usize, usize),
    /// Just after the `>`.
    end: usize,
    closing: bool,
    self_closing: bool,
}

/// Parses `<name ...>` or `</name ...>` at `lt` (in the lowercased text).
/// The name is an ASCII letter then letters or digits, followed by `>`, `/` or
/// white space; the tag ends at the first `>`, which must come before any
/// other `<`.
fn parse_tag(lb: &[u8], lt: usize, next_gt: &mut Next<'_>, next_lt: &mut Next<'_>) -> Option<Tag> {
    let mut j = lt + 1;
    let closing = lb.get(j) == Some(&b'/');
    if closing {
        j += 1;
    }
    let start = j;
    if !lb.get(j)?.is_ascii_lowercase() {
        return None;
    }
    while j < lb.len() && j - start < 40 && lb[j].is_ascii_alphanumeric() {
        j += 1;
    }
    let after = *lb.get(j)?;
    if !(after == b'>' || after == b'/' || after.is_ascii_whitespace()) {
        return None;
    }
    let gt = next_gt.at_or_after(j)?;
    if let Some(next) = next_lt.at_or_after(j)
        && next < gt
    {
        return None;
    }
    Some(Tag {
        name: (start, j),
        end: gt + 1,
        closing,
        self_closing: lb[gt - 1] == b'/',
    })
}

fn closers_for<'a, 'b>(
    closers: &'b mut Vec<(&'static str, Next<'a>)>,
    name: &'static str,
    lb: &'a [u8],
) -> &'b mut Next<'a> {
    let idx = match closers.iter().position(|(n, _)| *n == name) {
        Some(idx) => idx,
        None => {
            let needle: &'static [u8] = match name {
                "ref" => b"</ref",
                "references" => b"</references",
                "math" => b"</math",
                "chem" => b"</chem",
                "ce" => b"</ce",
                "gallery" => b"</gallery",
                "timeline" => b"</timeline",
                "imagemap" => b"</imagemap",
                "score" => b"</score",
                "graph" => b"</graph",
                "mapframe" => b"</mapframe",
                "maplink" => b"</maplink",
                "templatestyles" => b"</templatestyles",
                "templatedata" => b"</templatedata",
                "hiero" => b"</hiero",
                "inputbox" => b"</inputbox",
                "categorytree" => b"</categorytree",
                "indicator" => b"</indicator",
                "includeonly" => b"</includeonly",
                "nowiki" => b"</nowiki",
                "pre" => b"</pre",
                "source" => b"</source",
                "syntaxhighlight" => b"</syntaxhighlight",
                // Every name in DROP_CONTENT and LITERAL is listed above; an
                // unlisted one can only find nothing.
                _ => b"</\0",
            };
            closers.push((name, Next::new(lb, needle)));
            closers.len() - 1
        }
    };
    &mut closers[idx].1
}

/// Finds the closing tag for a finder of `</name`: returns where the content
/// ends and where the closing tag ends. As in MediaWiki, only `</name>` with
/// optional white space before the `>` closes: `</references>` does not close
/// a `<ref>`, nor does a mistyped `</ref name="x">`.
fn find_closing(closer: &mut Next<'_>, lb: &[u8], from: usize) -> Option<(usize, usize)> {
    let needle_len = closer.finder.needle().len();
    let mut p = from;
    loop {
        let at = closer.at_or_after(p)?;
        let after = at + needle_len;
        let blanks = lb[after..]
            .iter()
            .take_while(|c| c.is_ascii_whitespace())
            .count();
        match lb.get(after + blanks) {
            Some(b'>') => return Some((at, after + blanks + 1)),
            None => return None,
            Some(_) => p = at + 1,
        }
    }
}

/// Writes literal (`<nowiki>`) text so that no later pass reads it as markup:
/// every character that is markup somewhere becomes a numeric entity, which
/// the entity pass, running last, turns back into the character.
fn escape_literal(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '{' | '}' | '[' | ']' | '|' | '<' | '>' | '\'' | '=' | '&' | '*' | '#' | ':' | ';'
            | '_' | '-' | '~' => {
                out.push_str("&#");
                out.push_str(&u32::from(c).to_string());
                out.push(';');
            }
            _ => out.push(c),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `{{` (width 2) or `{{{` (width 3).
    Braces(usize),
    Table,
}

/// Pass 2: templates and tables. See [`strip_wikitext`].
///
/// Bracket matching with a stack: every matched opener/closer pair gives a
/// byte range to drop; unmatched ones stay as text. A closer of one kind pops
/// any unmatched openers of the other kind above its own opener (they are
/// inside the dropped range anyway).
fn templates_and_tables(src: &str) -> String {
    let b = src.as_bytes();
    let mut stack: Vec<(usize, Kind)> = Vec::new();
    let mut tables_open = 0usize;
    let mut braces_open = 0usize;
    let mut drops: Vec<(usize, usize)> = Vec::new();
    let mut at_line_start = true;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b'{' => {
                let run = b[i..].iter().take_while(|&&x| x == b'{').count();
                if run == 1 {
                    if at_line_start && b.get(i + 1) == Some(&b'|') {
                        stack.push((i, Kind::Table));
                        tables_open += 1;
                        i += 2;
                    } else {
                        i += 1;
                    }
                } else {
                    // Split a run into openers: pairs, and one triple if odd.
                    let mut left = run;
                    let mut p = i;
                    while left > 0 {
                        let w = if left == 3 { 3 } else { 2.min(left) };
                        if w < 2 {
                            break;
                        }
                        stack.push((p, Kind::Braces(w)));
                        braces_open += 1;
                        p += w;
                        left -= w;
                    }
                    i += run;
                }
                at_line_start = false;
            }
            b'}' => {
                let run = b[i..].iter().take_while(|&&x| x == b'}').count();
                let mut left = run;
                while left >= 2 && braces_open > 0 {
                    // Unwind tables opened inside this template.
                    while let Some(&(_, Kind::Table)) = stack.last() {
                        stack.pop();
                        tables_open -= 1;
                    }
                    let Some((start, Kind::Braces(w))) = stack.pop() else {
                        break;
                    };
                    braces_open -= 1;
                    let used = w.min(left);
                    left -= used;
                    let end = i + (run - left);
                    drops.push((start, end));
                }
                i += run;
                at_line_start = false;
            }
            b'|' if at_line_start && b.get(i + 1) == Some(&b'}') && tables_open > 0 => {
                while let Some(&(_, Kind::Braces(_))) = stack.last() {
                    stack.pop();
                    braces_open -= 1;
                }
                if let Some((start, Kind::Table)) = stack.pop() {
                    tables_open -= 1;
                    drops.push((start, i + 2));
                }
                i += 2;
                at_line_start = false;
            }
            b'\n' => {
                at_line_start = true;
                i += 1;
            }
            b' ' | b'\t' => i += 1,
            _ => {
                at_line_start = false;
                i += 1;
            }
        }
    }
    drops.sort_unstable();
    let mut out = String::with_capacity(src.len());
    let mut copied = 0;
    for (start, end) in drops {
        if start >= copied {
            out.push_str(&src[copied..start]);
            copied = end;
        } else if end > copied {
            copied = end;
        }
    }
    out.push_str(&src[copied..]);
    out
}

/// Pass 3: internal links, then external links. See [`strip_wikitext`].
///
/// Internal links go first because an external link's label may hold one
/// (`[http://x talk at [[Berkeley|UC Berkeley]]]`), and its `]]` would
/// otherwise end the external link early.
fn links(src: &str) -> String {
    external_links(&internal_links(src))
}

/// Each open `[[` gets a frame that collects its (already rendered) content;
/// `]]` renders the frame into its parent. Openers never closed are written
/// back as text.
fn internal_links(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut frames: Vec<String> = Vec::new();
    let mut i = 0;
    let mut copied = 0;
    while let Some(k) = memchr2(b'[', b']', &b[i..]) {
        let at = i + k;
        let depth = frames.len();
        let target = frames.last_mut().unwrap_or(&mut out);
        if b[at] == b'[' && b.get(at + 1) == Some(&b'[') {
            target.push_str(&src[copied..at]);
            if depth < MAX_LINK_DEPTH {
                frames.push(String::new());
            } else {
                target.push_str("[[");
            }
            i = at + 2;
            copied = i;
        } else if b[at] == b']' && b.get(at + 1) == Some(&b']') && depth > 0 {
            target.push_str(&src[copied..at]);
            let content = frames.pop().unwrap_or_default();
            let parent = frames.last_mut().unwrap_or(&mut out);
            render_link(&content, parent);
            i = at + 2;
            copied = i;
        } else {
            i = at + 1;
        }
    }
    let target = frames.last_mut().unwrap_or(&mut out);
    target.push_str(&src[copied..]);
    // Unclosed `[[`: back to text, outermost first.
    let mut rest = String::new();
    for frame in frames.drain(..) {
        rest.push_str("[[");
        rest.push_str(&frame);
    }
    out.push_str(&rest);
    out
}

/// `[url label]` → label, `[url]` → nothing; the `]` must be on the same
/// line. A `[` not followed by a URL scheme is text.
fn external_links(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut next_close = Next::new(b, b"]");
    let mut next_newline = Next::new(b, b"\n");
    let mut i = 0;
    let mut copied = 0;
    while let Some(k) = memchr(b'[', &b[i..]) {
        let at = i + k;
        i = at + 1;
        if !starts_with_url(&b[at + 1..]) {
            continue;
        }
        let close = next_close.at_or_after(at + 1);
        let newline = next_newline.at_or_after(at + 1);
        if let Some(close) = close
            && newline.is_none_or(|n| close < n)
        {
            out.push_str(&src[copied..at]);
            let inner = &src[at + 1..close];
            if let Some(space) = inner.find([' ', '\t']) {
                out.push_str(inner[space..].trim());
            }
            i = close + 1;
            copied = i;
        }
    }
    out.push_str(&src[copied..]);
    out
}

/// URL schemes MediaWiki turns into external links inside `[...]`.
fn starts_with_url(b: &[u8]) -> bool {
    const SCHEMES: &[&[u8]] = &[
        b"http://",
        b"https://",
        b"ftp://",
        b"ftps://",
        b"//",
        b"mailto:",
        b"news:",
        b"irc://",
        b"ircs://",
        b"gopher://",
        b"sftp://",
        b"git://",
        b"svn://",
        b"telnet://",
        b"urn:",
    ];
    SCHEMES
        .iter()
        .any(|s| b.len() >= s.len() && b[..s.len()].eq_ignore_ascii_case(s))
}

/// Renders the content of one `[[...]]`.
fn render_link(content: &str, out: &mut String) {
    let (target, label) = match content.split_once('|') {
        Some((t, l)) => (t.trim(), Some(l.trim())),
        None => (content.trim(), None),
    };
    let (target, forced) = match target.strip_prefix(':') {
        Some(t) => (t.trim_start(), true),
        None => (target, false),
    };
    if !forced && let Some((prefix, _)) = target.split_once(':') {
        let prefix = prefix.trim();
        // Namespaces are case-insensitive; interlanguage prefixes are written
        // in lower case, and "[[UN:...]]" is not one.
        if DROP_NAMESPACES.contains(&prefix.to_lowercase().as_str()) || is_language_prefix(prefix) {
            return;
        }
    }
    match label {
        Some(label) if !label.is_empty() => out.push_str(label),
        _ => out.extend(target.chars().map(|c| if c == '_' { ' ' } else { c })),
    }
}

/// An interlanguage prefix: a language code such as `de`, `fr`, `als`,
/// `zh-yue`, `be-x-old`, or `simple`. Two interwiki prefixes of that shape that
/// are *not* languages (`wp`, `mw`) are excluded.
fn is_language_prefix(p: &str) -> bool {
    if p == "simple" {
        return true;
    }
    if p == "wp" || p == "mw" {
        return false;
    }
    let mut parts = p.split('-');
    let first = parts.next().unwrap_or_default();
    (2..=3).contains(&first.len())
        && first.bytes().all(|c| c.is_ascii_lowercase())
        && parts.all(|s| !s.is_empty() && s.len() <= 8 && s.bytes().all(|c| c.is_ascii_lowercase()))
}

/// Pass 4: line markup, behaviour switches and emphasis quotes. See the
/// [module rules](self).
fn lines(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    for (n, line) in src.split('\n').enumerate() {
        if n > 0 {
            out.push('\n');
        }
        let mut l = line.trim_start_matches(['*', '#', ':', ';']).trim_start();
        if l.starts_with("----") {
            l = l.trim_start_matches('-');
        }
        let trimmed = l.trim_end();
        if trimmed.len() >= 2 && trimmed.starts_with('=') && trimmed.ends_with('=') {
            l = trimmed.trim_matches('=');
        }
        inline_markup(l, &mut out);
    }
    out
}

/// Removes `__MAGIC__` words and `''`-style emphasis from one line.
fn inline_markup(line: &str, out: &mut String) {
    let b = line.as_bytes();
    let mut i = 0;
    let mut copied = 0;
    while let Some(k) = memchr2(b'_', b'\'', &b[i..]) {
        let at = i + k;
        let c = b[at];
        let run = b[at..].iter().take_while(|&&x| x == c).count();
        if c == b'\'' {
            if run >= 2 {
                out.push_str(&line[copied..at]);
                // 4 quotes: one apostrophe and bold; more than 5: the extra
                // are apostrophes (MediaWiki's reading).
                let keep = match run {
                    4 => 1,
                    r if r > 5 => r - 5,
                    _ => 0,
                };
                out.extend(std::iter::repeat_n('\'', keep));
                copied = at + run;
            }
            i = at + run;
        } else {
            // `__` + upper case letters and underscores + `__`, taken as one
            // run so a failed match is never rescanned.
            let word = b[at..]
                .iter()
                .take_while(|&&x| x == b'_' || x.is_ascii_uppercase())
                .count();
            let w = &b[at..at + word];
            if run >= 2
                && w.len() >= 5
                && w.ends_with(b"__")
                && w.iter().any(u8::is_ascii_uppercase)
                && !w[run..].starts_with(b"_")
            {
                out.push_str(&line[copied..at]);
                copied = at + word;
            }
            i = at + word.max(1);
        }
    }
    out.push_str(&line[copied..]);
}

/// Pass 6: collapses blanks within lines, trims lines, and keeps at most one
/// blank line in a row.
fn tidy_whitespace(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut blank_lines = 0;
    for line in src.split('\n') {
        let mut words = line
            .split(|c: char| c.is_whitespace())
            .filter(|w| !w.is_empty());
        let Some(first) = words.next() else {
            blank_lines += 1;
            continue;
        };
        if !out.is_empty() {
            out.push_str(if blank_lines > 0 { "\n\n" } else { "\n" });
        }
        blank_lines = 0;
        out.push_str(first);
        for w in words {
            out.push(' ');
            out.push_str(w);
        }
    }
    out
}

#[cfg(test)]
mod tests;

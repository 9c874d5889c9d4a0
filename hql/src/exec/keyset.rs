//! `ROW IN (...)` and `ROW IN FILE "keys.txt[.gz]"`: the rows of a key set, sorted and without
//! repeats, read within [`KeySetLimits`].
//!
//! A key file holds one row key per line, exactly as written (no quoting, no escapes; a `\r`
//! before the `\n` is dropped, so files from Windows work). An empty line is an error, as is a
//! key longer than a row may be: the error names the file and the line.

use std::io::{BufRead, BufReader, Read};

use common::mutation::MAX_ROW_OR_QUALIFIER_BYTES;

use super::{ExecError, Result};
use crate::ast::{FileScheme, RowSet};

/// Bounds on one statement's key set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeySetLimits {
    /// Most distinct keys.
    pub max_keys: usize,
    /// Most bytes of keys (each key counted once).
    pub max_bytes: usize,
}

impl Default for KeySetLimits {
    fn default() -> Self {
        Self {
            max_keys: 10_000_000,
            max_bytes: 1 << 30,
        }
    }
}

/// The set's rows in ascending order, each once.
pub(super) fn rows(set: &RowSet, limits: &KeySetLimits) -> Result<Vec<Vec<u8>>> {
    let mut keys = Keys {
        keys: Vec::new(),
        bytes: 0,
        check_at: (limits.max_keys, limits.max_bytes),
        limits,
    };
    match set {
        RowSet::Keys(list) => {
            for (n, k) in list.iter().enumerate() {
                keys.add(k.as_bytes().to_vec(), &|| format!("ROW IN: key {}", n + 1))?;
            }
        }
        RowSet::File(name) => {
            read_lines(name, "ROW IN FILE", |line, at| keys.add(line.to_vec(), at))?
        }
    }
    keys.finish(&|| match set {
        RowSet::Keys(_) => "ROW IN".to_string(),
        RowSet::File(name) => format!("ROW IN FILE {name}"),
    })
}

/// The values of a key file, each line turned into a value by `value` (its error is the
/// statement's), sorted and without repeats, within `limits`. `what` starts each error
/// (`objectid IN FILE`).
pub(super) fn lines(
    name: &str,
    what: &str,
    limits: &KeySetLimits,
    mut value: impl FnMut(&[u8], &dyn Fn() -> String) -> Result<Vec<u8>>,
) -> Result<Vec<Vec<u8>>> {
    let mut keys = Keys {
        keys: Vec::new(),
        bytes: 0,
        check_at: (limits.max_keys, limits.max_bytes),
        limits,
    };
    read_lines(name, what, |line, at| {
        if line.is_empty() {
            return Err(ExecError::invalid(format!("{}: an empty line", at())));
        }
        let v = value(line, at)?;
        keys.add(v, at)
    })?;
    keys.finish(&|| format!("{what} {name}"))
}

/// The keys gathered so far: appended as they come, then sorted and made distinct, at the end
/// and whenever they reach `check_at` (so repeats do not count against the limits). Sorting
/// once is several times cheaper than keeping a sorted set for a key file of 400K keys. A set
/// over the limits is refused at the line where a check finds it so, or at the end; it holds
/// at most twice the limits before that.
struct Keys<'a> {
    keys: Vec<Vec<u8>>,
    /// Bytes of `keys` (repeats counted until the next sort).
    bytes: usize,
    /// Keys and bytes at which they are sorted and checked next: the limits at first, and
    /// after a sort twice what it left (within twice the limits), so sorts cost O(n log n)
    /// in all.
    check_at: (usize, usize),
    limits: &'a KeySetLimits,
}

impl Keys<'_> {
    fn add(&mut self, key: Vec<u8>, at: &dyn Fn() -> String) -> Result<()> {
        if key.is_empty() {
            return Err(ExecError::invalid(format!("{}: an empty row key", at())));
        }
        if key.len() > MAX_ROW_OR_QUALIFIER_BYTES {
            return Err(ExecError::invalid(format!(
                "{}: a row key of {} bytes (rows are at most {MAX_ROW_OR_QUALIFIER_BYTES})",
                at(),
                key.len()
            )));
        }
        self.bytes += key.len();
        self.keys.push(key);
        if self.keys.len() > self.check_at.0 || self.bytes > self.check_at.1 {
            // Count again without the repeats.
            self.sort();
            self.check(at)?;
            let l = self.limits;
            self.check_at = (
                (2 * self.keys.len()).clamp(l.max_keys, 2 * l.max_keys),
                (2 * self.bytes).clamp(l.max_bytes, 2 * l.max_bytes),
            );
        }
        Ok(())
    }

    fn sort(&mut self) {
        sort_keys(&mut self.keys);
        self.keys.dedup();
        self.bytes = self.keys.iter().map(Vec::len).sum();
    }

    fn check(&self, at: &dyn Fn() -> String) -> Result<()> {
        if self.keys.len() > self.limits.max_keys || self.bytes > self.limits.max_bytes {
            return Err(ExecError::invalid(format!(
                "{}: the key set holds more than {} keys or {} bytes",
                at(),
                self.limits.max_keys,
                self.limits.max_bytes
            )));
        }
        Ok(())
    }

    /// The keys in ascending order, each once; `what` names the set in an error.
    fn finish(mut self, what: &dyn Fn() -> String) -> Result<Vec<Vec<u8>>> {
        self.sort();
        self.check(what)?;
        Ok(self.keys)
    }
}

/// Sorts `keys` bytewise. Keys are compared by their first 8 bytes as a number first
/// (`common::key::prefix_word`), in an array of (word, position) that stays in the CPU cache, and only keys of
/// equal words by their bytes: sorting 400K keys read from a file this way is several times
/// faster than comparing the keys themselves, each behind a pointer.
fn sort_keys(keys: &mut Vec<Vec<u8>>) {
    if keys.is_sorted() {
        return;
    }
    let mut order: Vec<(u64, usize)> = keys
        .iter()
        .map(|k| common::key::prefix_word(k))
        .zip(0..)
        .collect();
    order.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| keys[a.1].cmp(&keys[b.1])));
    let mut old = std::mem::take(keys);
    keys.extend(order.iter().map(|&(_, i)| std::mem::take(&mut old[i])));
}

/// Calls `each` with every line of the file `name` (without its line end), and a closure
/// naming the file and line for errors.
fn read_lines(
    name: &str,
    what: &str,
    mut each: impl FnMut(&[u8], &dyn Fn() -> String) -> Result<()>,
) -> Result<()> {
    let path = match FileScheme::split(name) {
        (FileScheme::Local, p) => p,
        (FileScheme::Fs, _) => {
            return Err(ExecError::invalid(format!(
                "{what} '{name}': fs:// key files are not supported; use a local file"
            )));
        }
    };
    let f = std::fs::File::open(path)
        .map_err(|e| ExecError::invalid(format!("{what}: cannot open '{name}': {e}")))?;
    let raw: Box<dyn Read> = if path.ends_with(".gz") {
        Box::new(flate2::read::MultiGzDecoder::new(BufReader::new(f)))
    } else {
        Box::new(f)
    };
    let mut src = BufReader::with_capacity(1 << 16, raw);
    // A line split between two reads of the buffer; it holds at most one byte past the
    // longest key (and its line end).
    let mut line = Vec::new();
    let mut n = 0u64;
    let mut emit = |n: u64, mut l: &[u8], ended: bool| -> Result<()> {
        if ended {
            l = l.strip_suffix(b"\r").unwrap_or(l);
        }
        let at = || format!("{what} {name}: line {n}");
        if !ended && l.len() > MAX_ROW_OR_QUALIFIER_BYTES {
            return Err(ExecError::invalid(format!(
                "{}: a line longer than {MAX_ROW_OR_QUALIFIER_BYTES} bytes",
                at()
            )));
        }
        each(l, &at)
    };
    loop {
        let buf = match src.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(ExecError::invalid(format!(
                    "{what} {name}: line {}: {e}",
                    n + 1
                )));
            }
        };
        if buf.is_empty() {
            if !line.is_empty() {
                emit(n + 1, &line, false)?;
            }
            return Ok(());
        }
        let mut used = 0;
        while let Some(i) = memchr::memchr(b'\n', &buf[used..]) {
            n += 1;
            let whole = &buf[used..used + i];
            if line.is_empty() {
                emit(n, whole, true)?;
            } else {
                line.extend_from_slice(whole);
                emit(n, &line, true)?;
                line.clear();
            }
            used += i + 1;
        }
        let rest = &buf[used..];
        line.extend_from_slice(rest);
        let len = buf.len();
        src.consume(len);
        // At most one byte past the longest key (and its `\r`) is kept of an unended line.
        if line.len() > MAX_ROW_OR_QUALIFIER_BYTES + 1 {
            return emit(n + 1, &line, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn file(name: &str, bytes: &[u8]) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let p = path.to_str().unwrap().to_string();
        (dir, p)
    }

    #[test]
    fn keys_come_sorted_and_once_from_literals_plain_and_gzip_files() {
        let l = KeySetLimits::default();
        let lit = RowSet::Keys(vec!["b".into(), "a".into(), "b".into()]);
        assert_eq!(rows(&lit, &l).unwrap(), [b"a".to_vec(), b"b".to_vec()]);
        let (_d, p) = file("k.txt", b"k2\r\nk1\nk2\nk 3");
        let want = [b"k 3".to_vec(), b"k1".to_vec(), b"k2".to_vec()];
        assert_eq!(rows(&RowSet::File(p), &l).unwrap(), want);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(b"k2\nk1\nk 3\n").unwrap();
        let (_d2, p) = file("k.txt.gz", &gz.finish().unwrap());
        assert_eq!(rows(&RowSet::File(p), &l).unwrap(), want);
    }

    #[test]
    fn lines_split_between_reads_come_back_whole() {
        // 30K keys of varying length with `\r\n` and `\n` ends: lines and line ends fall on
        // every position of the 64 KiB read buffer; the last line has no end.
        let l = KeySetLimits::default();
        let keys: Vec<String> = (0..30_000u32)
            .map(|i| format!("k{}", "x".repeat((i % 7) as usize) + &i.to_string()))
            .collect();
        let mut text = String::new();
        for (i, k) in keys.iter().enumerate() {
            text.push_str(k);
            if i + 1 < keys.len() {
                text.push_str(if i % 3 == 0 { "\r\n" } else { "\n" });
            }
        }
        let mut want: Vec<Vec<u8>> = keys.iter().map(|k| k.as_bytes().to_vec()).collect();
        want.sort();
        let (_d, p) = file("many.txt", text.as_bytes());
        assert_eq!(rows(&RowSet::File(p), &l).unwrap(), want);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(text.as_bytes()).unwrap();
        let (_d2, p) = file("many.txt.gz", &gz.finish().unwrap());
        assert_eq!(rows(&RowSet::File(p), &l).unwrap(), want);
        // An empty line deep in the file is named by its number.
        let (_d3, p) = file("gap.txt", format!("{text}\n\nlast").as_bytes());
        let e = rows(&RowSet::File(p), &l).unwrap_err().to_string();
        assert!(e.contains("line 30001") && e.contains("empty"), "{e}");
    }

    #[test]
    fn keys_sort_bytewise_whatever_their_first_eight_bytes() {
        let mut keys: Vec<Vec<u8>> = [
            "",
            "a",
            "abcdefgh",
            "abcdefgh\0",
            "abcdefg",
            "abcdefghz",
            "abcdefgha",
            "b",
            "\0",
            "abcdefgh",
            "zzzzzzzzzzzz",
            "abcdefgi",
        ]
        .iter()
        .map(|k| k.as_bytes().to_vec())
        .collect();
        let mut want = keys.clone();
        want.sort();
        sort_keys(&mut keys);
        assert_eq!(keys, want);
    }

    #[test]
    fn bad_key_files_name_the_file_and_line() {
        let l = KeySetLimits::default();
        let (_d, p) = file("k.txt", b"a\n\nb\n");
        let e = rows(&RowSet::File(p.clone()), &l).unwrap_err().to_string();
        assert!(
            e.contains(&p) && e.contains("line 2") && e.contains("empty"),
            "{e}"
        );
        let mut long = vec![b'x'; MAX_ROW_OR_QUALIFIER_BYTES + 1];
        long.insert(0, b'\n');
        long.insert(0, b'a');
        let (_d, p) = file("long.txt", &long);
        let e = rows(&RowSet::File(p), &l).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("longer"), "{e}");
        let small = KeySetLimits {
            max_keys: 2,
            max_bytes: 100,
        };
        // A repeat does not count: the third distinct key makes the set too large, found
        // at the end (or at a line, once the keys read reach the limits again).
        let (_d, p) = file("many.txt", b"a\nb\na\nc\n");
        let e = rows(&RowSet::File(p.clone()), &small)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!(
                "ROW IN FILE {p}: the key set holds more than 2 keys"
            )),
            "{e}"
        );
        let (_d, p) = file("more.txt", b"a\nb\nc\nd\ne\nf\n");
        let e = rows(&RowSet::File(p), &small).unwrap_err().to_string();
        assert!(
            e.contains("line 3") && e.contains("more than 2 keys"),
            "{e}"
        );
        let (_d, p) = file("twice.txt", b"a\nb\na\nb\na\nb\na\n");
        assert_eq!(
            rows(&RowSet::File(p), &small).expect("two keys"),
            vec![b"a".to_vec(), b"b".to_vec()]
        );
        let (_d, p) = file("bad.gz", b"not gzip at all");
        let e = rows(&RowSet::File(p.clone()), &l).unwrap_err().to_string();
        assert!(e.contains(&p) && e.contains("line 1"), "{e}");
        let e = rows(&RowSet::File("/nonexistent/k.txt".into()), &l)
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot open"), "{e}");
    }
}

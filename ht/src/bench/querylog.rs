//! `ht bench gen-query-log`: a deterministic query log in Hypertable's multi-cell TSV format,
//! fitted to the real AOL files (`--fit FILE...` prints the statistics the constants come from).
//!
//! Output: the header `#anon_id\tquery\titem:rank\tclick_url`, then one line per query event,
//! sorted by user like the AOL release. Users issue a geometric number of events; an event
//! repeats the user's previous query with the measured probability (several clicks on one
//! result page); words follow a Zipf law over a fixed pseudo-word vocabulary.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The header of generated logs.
pub const HEADER: &str = "#anon_id\tquery\titem:rank\tclick_url";

// Fitted constants. Measured with
//   ht bench gen-query-log --fit ../shared/data/aol/query-log-top1000-users.tsv.gz \
//       ../shared/data/aol/query-log-clicked-subset.tsv.gz
// on the 500,785 lines of both files (see `fit` below for what each figure is):
//   AnonID: mean 6.60 bytes, range 142..23565714; 2017 users, 248.3 lines per user
//     (the clicked subset alone: 91.3 lines per user; the top-1000 file holds the most active
//     users by construction: 407.9)
//   query: mean 19.94 bytes, 3.15 words (1: 17.6%, 2: 25.2%, 3: 23.5%, 4: 15.3%, 5: 8.6%, 6+: 9.8%)
//   words: mean 5.65 bytes; 65,824 distinct; Zipf exponent 1.00 over the top 10,000;
//     length 1..12+ shares [0.014, 0.074, 0.113, 0.166, 0.156, 0.142, 0.125, 0.087, 0.050,
//     0.037, 0.018, 0.021]
//   same query as the previous line of the user: 39.3%
//   ItemRank empty: 81.5% (the top1000 file has none), mean 1.16 bytes when present,
//     shares of 1..10+ [0.393, 0.119, 0.085, 0.062, 0.051, 0.042, 0.036, 0.032, 0.030, 0.149]
//   ClickURL empty: 18.5% (the clicked subset has none), mean 26.18 bytes when present
//   cells per line: 2.00 (every line of these two files is a click); value mean 20.74 bytes
// The files hold only click lines; the full AOL release has 19,442,629 clicks in 36,389,567
// lines (its README), so 46.6% of generated lines are queries without a click (one cell).

/// AnonIDs spread in increasing order over this range: its top is chosen so that the mean key
/// length is the measured 6.6 bytes (ids of the real files go to 23.5M but most are smaller).
const ANON_ID_MIN: u64 = 142;
const ANON_ID_MAX: u64 = 3_500_000;
/// Mean events per user (the clicked subset's figure).
const LINES_PER_USER: f64 = 91.3;
/// Share of events that repeat the user's previous query.
const REPEAT_QUERY: f64 = 0.393;
/// Words per query: weights for 1, 2, ... words (the last bucket is 6 to 9).
const WORDS_PER_QUERY: [f64; 6] = [0.176, 0.252, 0.235, 0.153, 0.086, 0.098];
/// Vocabulary size and Zipf exponent of word frequencies.
const VOCABULARY: usize = 65_824;
const ZIPF_EXPONENT: f64 = 1.00;
/// Word length weights for 1..=12 letters.
const WORD_LENGTHS: [f64; 12] = [
    0.014, 0.074, 0.113, 0.166, 0.156, 0.142, 0.125, 0.087, 0.050, 0.037, 0.018, 0.021,
];
/// Share of lines with no click (AOL README), then of click lines without a rank (the rest
/// without a URL), as the two files mix.
const NO_CLICK: f64 = 0.466;
const CLICK_WITHOUT_RANK: f64 = 0.815;
/// Item ranks: weights of 1..=9 and of 10 or more (spread over 10..=50, which keeps the
/// measured mean of 1.16 bytes).
const RANKS: [f64; 10] = [
    0.393, 0.119, 0.085, 0.062, 0.051, 0.042, 0.036, 0.032, 0.030, 0.149,
];
/// URLs: `http://www.` + name + TLD + `/`; a name of 3..=17 letters gives the measured mean
/// of 26.2 bytes.
const URL_NAME_MIN: usize = 3;
const URL_NAME_MAX: usize = 17;
const TLDS: [&str; 4] = [".com", ".org", ".net", ".gov"];

/// Options of `ht bench gen-query-log`.
#[derive(Args, Debug)]
pub struct GenArgs {
    /// Lines to write (after the header).
    #[arg(long, default_value_t = 1_000_000)]
    pub lines: u64,
    /// Seed: the same seed gives the same file.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output file (`.gz` is compressed); standard output if absent.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Instead of generating, print the statistics of these AOL files (5 columns: AnonID,
    /// Query, QueryTime, ItemRank, ClickURL; `.gz` allowed), or of generated logs.
    #[arg(long, num_args = 1.., value_name = "FILE")]
    pub fit: Vec<PathBuf>,
}

/// Runs the subcommand.
pub fn run(args: GenArgs) -> anyhow::Result<()> {
    if !args.fit.is_empty() {
        let s = fit(&args.fit)?;
        print!("{s}");
        return Ok(());
    }
    match &args.out {
        Some(p) => {
            let f =
                std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?;
            let w = std::io::BufWriter::with_capacity(1 << 20, f);
            if p.extension().is_some_and(|e| e == "gz") {
                let mut gz = flate2::write::GzEncoder::new(w, flate2::Compression::default());
                generate(args.lines, args.seed, &mut gz)?;
                gz.finish()?.flush()?;
            } else {
                let mut w = w;
                generate(args.lines, args.seed, &mut w)?;
                w.flush()?;
            }
        }
        None => {
            let mut w = std::io::BufWriter::new(std::io::stdout().lock());
            generate(args.lines, args.seed, &mut w)?;
            w.flush()?;
        }
    }
    Ok(())
}

/// Writes the header and `lines` lines.
pub fn generate(lines: u64, seed: u64, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "{HEADER}")?;
    let mut g = Generator::new(seed, lines);
    let mut line = Vec::with_capacity(256);
    for _ in 0..lines {
        line.clear();
        g.line(&mut line);
        out.write_all(&line)?;
    }
    Ok(())
}

/// Produces the lines one at a time (also used by `ht bench load` without a file).
pub struct Generator {
    rng: StdRng,
    vocab: Vec<Vec<u8>>,
    zipf_cdf: Vec<f64>,
    words_cdf: Vec<f64>,
    rank_cdf: Vec<f64>,
    anon_id: u64,
    /// Mean id gap between users, so that ids span the measured range.
    id_gap: u64,
    left_for_user: u64,
    query: Vec<u8>,
}

fn cdf(weights: &[f64]) -> Vec<f64> {
    let total: f64 = weights.iter().sum();
    let mut acc = 0.0;
    weights
        .iter()
        .map(|w| {
            acc += w / total;
            acc
        })
        .collect()
}

fn pick(rng: &mut StdRng, cdf: &[f64]) -> usize {
    let x: f64 = rng.random();
    cdf.partition_point(|&c| c < x).min(cdf.len() - 1)
}

impl Generator {
    pub fn new(seed: u64, lines: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let zipf: Vec<f64> = (1..=VOCABULARY)
            .map(|r| 1.0 / (r as f64).powf(ZIPF_EXPONENT))
            .collect();
        let zipf_cdf = cdf(&zipf);
        // Lengths by frequency: the measured shares are of word occurrences, so word r gets
        // the length at the middle of its share of all occurrences (frequent words are short).
        let len_cdf = cdf(&WORD_LENGTHS);
        let vocab = (0..VOCABULARY)
            .map(|r| {
                let lo = if r == 0 { 0.0 } else { zipf_cdf[r - 1] };
                let mid = (lo + zipf_cdf[r]) / 2.0;
                let n = len_cdf.partition_point(|&c| c < mid).min(len_cdf.len() - 1) + 1;
                // The last bucket is 12 letters or more.
                let n = if n == WORD_LENGTHS.len() {
                    n + rng.random_range(0..4)
                } else {
                    n
                };
                (0..n).map(|_| rng.random_range(b'a'..=b'z')).collect()
            })
            .collect();
        let users = (lines as f64 / LINES_PER_USER).max(1.0);
        let id_gap = (((ANON_ID_MAX - ANON_ID_MIN) as f64 / users) as u64).max(1);
        Self {
            rng,
            vocab,
            zipf_cdf,
            words_cdf: cdf(&WORDS_PER_QUERY),
            rank_cdf: cdf(&RANKS),
            anon_id: ANON_ID_MIN,
            id_gap,
            left_for_user: 0,
            query: Vec::new(),
        }
    }

    /// Appends one line (with its newline).
    pub fn line(&mut self, out: &mut Vec<u8>) {
        let mut new_user = false;
        if self.left_for_user == 0 {
            // Geometric events per user with the measured mean.
            let p = 1.0 / LINES_PER_USER;
            let u: f64 = self.rng.random::<f64>().max(f64::MIN_POSITIVE);
            self.left_for_user = 1 + (u.ln() / (1.0 - p).ln()) as u64;
            self.anon_id += self.rng.random_range(1..=2 * self.id_gap);
            new_user = true;
        }
        self.left_for_user -= 1;
        if new_user || self.query.is_empty() || !self.rng.random_bool(REPEAT_QUERY) {
            self.new_query();
        }
        out.extend_from_slice(self.anon_id.to_string().as_bytes());
        out.push(b'\t');
        out.extend_from_slice(&self.query);
        out.push(b'\t');
        let click = !self.rng.random_bool(NO_CLICK);
        if click {
            let with_rank = !self.rng.random_bool(CLICK_WITHOUT_RANK);
            if with_rank {
                let r = pick(&mut self.rng, &self.rank_cdf) + 1;
                // The last bucket spreads over 10..=50.
                let r = if r == RANKS.len() {
                    self.rng.random_range(10..=50)
                } else {
                    r
                };
                out.extend_from_slice(r.to_string().as_bytes());
                out.push(b'\t');
            } else {
                out.push(b'\t');
                self.url(out);
            }
        } else {
            out.push(b'\t');
        }
        out.push(b'\n');
    }

    fn new_query(&mut self) {
        self.query.clear();
        let words = pick(&mut self.rng, &self.words_cdf) + 1;
        let words = if words == WORDS_PER_QUERY.len() {
            self.rng.random_range(6..=9)
        } else {
            words
        };
        for i in 0..words {
            if i > 0 {
                self.query.push(b' ');
            }
            let w = pick(&mut self.rng, &self.zipf_cdf);
            self.query.extend_from_slice(&self.vocab[w]);
        }
    }

    fn url(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"http://www.");
        let n = self.rng.random_range(URL_NAME_MIN..=URL_NAME_MAX);
        for _ in 0..n {
            out.push(self.rng.random_range(b'a'..=b'z'));
        }
        out.extend_from_slice(TLDS[self.rng.random_range(0..TLDS.len())].as_bytes());
        out.push(b'/');
    }
}

/// Opens a file, decompressing `.gz`.
pub fn open_maybe_gz(path: &Path) -> anyhow::Result<Box<dyn BufRead + Send>> {
    let f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    Ok(if path.extension().is_some_and(|e| e == "gz") {
        Box::new(BufReader::with_capacity(
            1 << 20,
            flate2::read::MultiGzDecoder::new(BufReader::new(f)),
        ))
    } else {
        Box::new(BufReader::with_capacity(1 << 20, f))
    })
}

#[derive(Default)]
struct Stats {
    lines: u64,
    id_bytes: u64,
    id_min: u64,
    id_max: u64,
    users: u64,
    query_bytes: u64,
    words: u64,
    words_hist: [u64; 7],
    word_len_hist: [u64; 13],
    word_bytes: u64,
    word_freq: HashMap<Vec<u8>, u64>,
    repeats: u64,
    rank_empty: u64,
    rank_bytes: u64,
    rank_hist: [u64; 11],
    url_empty: u64,
    url_bytes: u64,
    cells: u64,
}

/// Statistics of AOL files, as text.
pub fn fit(files: &[PathBuf]) -> anyhow::Result<String> {
    let mut s = Stats {
        id_min: u64::MAX,
        ..Stats::default()
    };
    for path in files {
        let mut prev: (Vec<u8>, Vec<u8>) = (Vec::new(), Vec::new());
        for (i, line) in open_maybe_gz(path)?.split(b'\n').enumerate() {
            let line = line?;
            if i == 0 {
                continue; // The header.
            }
            let f: Vec<&[u8]> = line.split(|&b| b == b'\t').collect();
            // AOL's five columns, or the four of a generated log (to check the fit).
            let (id, query, rank, url) = match f[..] {
                [id, q, _, r, u] => (id, q, r, u),
                [id, q, r, u] => (id, q, r, u),
                _ => bail!(
                    "{}: line {}: {} fields, expected 4 or 5",
                    path.display(),
                    i + 1,
                    f.len()
                ),
            };
            s.lines += 1;
            s.id_bytes += id.len() as u64;
            let idn: u64 = std::str::from_utf8(id)
                .ok()
                .and_then(|t| t.parse().ok())
                .unwrap_or(0);
            s.id_min = s.id_min.min(idn);
            s.id_max = s.id_max.max(idn);
            if id != prev.0.as_slice() {
                s.users += 1;
            } else if query == prev.1.as_slice() {
                s.repeats += 1;
            }
            s.query_bytes += query.len() as u64;
            let mut n = 0;
            for w in query.split(|&b| b == b' ').filter(|w| !w.is_empty()) {
                n += 1;
                s.word_bytes += w.len() as u64;
                s.word_len_hist[w.len().min(12)] += 1;
                *s.word_freq.entry(w.to_vec()).or_default() += 1;
            }
            s.words += n;
            s.words_hist[(n as usize).min(6)] += 1;
            s.cells += u64::from(!query.is_empty())
                + u64::from(!rank.is_empty())
                + u64::from(!url.is_empty());
            if rank.is_empty() {
                s.rank_empty += 1;
            } else {
                s.rank_bytes += rank.len() as u64;
                let r: usize = std::str::from_utf8(rank)
                    .ok()
                    .and_then(|t| t.parse().ok())
                    .unwrap_or(0);
                s.rank_hist[r.min(10)] += 1;
            }
            if url.is_empty() {
                s.url_empty += 1;
            } else {
                s.url_bytes += url.len() as u64;
            }
            prev = (id.to_vec(), query.to_vec());
        }
    }
    let n = s.lines.max(1) as f64;
    let pct = |x: u64, of: u64| 100.0 * x as f64 / of.max(1) as f64;
    let mut freqs: Vec<u64> = s.word_freq.values().copied().collect();
    freqs.sort_unstable_by(|a, b| b.cmp(a));
    // Least-squares slope of log(frequency) over log(rank) for the top 10,000 words.
    let top = freqs.len().min(10_000);
    let pts: Vec<(f64, f64)> = (0..top)
        .map(|i| (((i + 1) as f64).ln(), (freqs[i] as f64).ln()))
        .collect();
    let m = pts.len().max(1) as f64;
    let (mx, my) = (
        pts.iter().map(|p| p.0).sum::<f64>() / m,
        pts.iter().map(|p| p.1).sum::<f64>() / m,
    );
    let slope = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>()
        / pts
            .iter()
            .map(|p| (p.0 - mx).powi(2))
            .sum::<f64>()
            .max(f64::MIN_POSITIVE);
    let ranked = s.lines - s.rank_empty;
    let mut out = String::new();
    use std::fmt::Write as _;
    let _ = writeln!(out, "lines: {}", s.lines);
    let _ = writeln!(
        out,
        "AnonID: mean {:.2} bytes, range {}..{}; {} users, {:.1} lines per user",
        s.id_bytes as f64 / n,
        s.id_min,
        s.id_max,
        s.users,
        n / s.users.max(1) as f64
    );
    let hist: Vec<String> = (1..=6)
        .map(|k| {
            format!(
                "{}{}: {:.1}%",
                k,
                if k == 6 { "+" } else { "" },
                pct(s.words_hist[k], s.lines)
            )
        })
        .collect();
    let _ = writeln!(
        out,
        "query: mean {:.2} bytes, {:.2} words ({}); empty {:.1}%",
        s.query_bytes as f64 / n,
        s.words as f64 / n,
        hist.join(", "),
        pct(s.words_hist[0], s.lines)
    );
    let lens: Vec<String> = (1..=12)
        .map(|k| format!("{:.3}", s.word_len_hist[k] as f64 / s.words.max(1) as f64))
        .collect();
    let _ = writeln!(
        out,
        "words: mean {:.2} bytes; {} distinct; Zipf exponent {:.2} over the top {top}; length 1..12+ shares [{}]",
        s.word_bytes as f64 / s.words.max(1) as f64,
        s.word_freq.len(),
        -slope,
        lens.join(", ")
    );
    let _ = writeln!(
        out,
        "same query as the previous line of the user: {:.1}%",
        pct(s.repeats, s.lines - s.users)
    );
    let ranks: Vec<String> = (1..=10)
        .map(|k| format!("{:.3}", s.rank_hist[k] as f64 / ranked.max(1) as f64))
        .collect();
    let _ = writeln!(
        out,
        "ItemRank empty: {:.1}%, value mean {:.2} bytes when present; shares of 1..10+ [{}]",
        pct(s.rank_empty, s.lines),
        s.rank_bytes as f64 / ranked.max(1) as f64,
        ranks.join(", ")
    );
    let _ = writeln!(
        out,
        "ClickURL empty: {:.1}%, value mean {:.2} bytes when present",
        pct(s.url_empty, s.lines),
        s.url_bytes as f64 / (s.lines - s.url_empty).max(1) as f64
    );
    let _ = writeln!(
        out,
        "cells per line: {:.2}; value mean {:.2} bytes",
        s.cells as f64 / n,
        (s.query_bytes + s.rank_bytes + s.url_bytes) as f64 / s.cells.max(1) as f64
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_lines() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        generate(500, 7, &mut a).unwrap();
        generate(500, 7, &mut b).unwrap();
        assert_eq!(a, b);
        let text = String::from_utf8(a).unwrap();
        assert!(text.starts_with(HEADER));
        assert_eq!(text.lines().count(), 501);
        assert!(text.lines().skip(1).all(|l| l.split('\t').count() == 4));
    }
}

//! Aggregates computed where the data is: what a scan aggregates ([`Aggregate`]), exact
//! decimals ([`Decimal`]), the fold of a scan's cells into a partial ([`AggregateFold`]), and
//! partials merged ([`AggregatePartial::merge`]) and rendered ([`AggregatePartial::render`]).
//!
//! A fold reads the newest version of each cell it is given (the greatest timestamp among a
//! cell's consecutive versions) and counts the distinct rows of every cell given. A row lies in
//! one range, so the partials of ranges, pieces and servers add up to the whole scan's.

use std::cmp::Ordering;

/// The most fraction digits a value may have to be aggregated exactly.
pub const MAX_SCALE: u8 = 18;

/// A column aggregated: a family, and one exact qualifier or all of them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AggregateColumn {
    pub family: u8,
    /// `None`: every qualifier of the family.
    pub qualifier: Option<Vec<u8>>,
}

impl AggregateColumn {
    pub fn matches(&self, family: u8, qualifier: &[u8]) -> bool {
        self.family == family && self.qualifier.as_deref().is_none_or(|q| q == qualifier)
    }
}

/// What a scan aggregates instead of returning cells: its rows are counted, and every column
/// here gets a [`ColumnPartial`]. Functions (SUM, AVG, ...) are chosen when rendering.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Aggregate {
    pub columns: Vec<AggregateColumn>,
}

/// The aggregate of `spec`, if the rest of the spec can be aggregated: a scan returning keys
/// only or delete markers cannot.
pub fn aggregate_of(spec: &crate::ScanSpec) -> Result<&Aggregate, String> {
    let agg = spec
        .aggregate
        .as_ref()
        .ok_or_else(|| "an aggregating scan names no aggregate".to_string())?;
    if spec.keys_only {
        return Err("aggregates read values: a KEYS_ONLY scan cannot aggregate".into());
    }
    if spec.return_deletes {
        return Err("a scan returning delete markers cannot aggregate".into());
    }
    Ok(agg)
}

/// True when the scan has limits or offsets (which count per interval, across ranges and
/// servers, or per family within a row): a cluster then folds the limited scan's cells on the
/// client instead of asking its servers for partials.
pub fn has_limits(spec: &crate::ScanSpec) -> bool {
    spec.row_limit != 0
        || spec.row_offset != 0
        || spec.cell_limit != 0
        || spec.cell_offset != 0
        || spec.cell_limit_per_family != 0
}

/// An aggregate function of a select list, rendered from a partial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AggregateFn {
    /// `COUNT(*)`: rows.
    CountRows,
    /// `COUNT(f)`: numeric cells.
    Count,
    Sum,
    Avg,
    Min,
    Max,
}

impl AggregateFn {
    /// How HQL spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::CountRows | Self::Count => "COUNT",
            Self::Sum => "SUM",
            Self::Avg => "AVG",
            Self::Min => "MIN",
            Self::Max => "MAX",
        }
    }
}

/// An exact decimal: `mantissa / 10^scale`, `scale <= MAX_SCALE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Decimal {
    pub mantissa: i128,
    pub scale: u8,
}

/// A value that looks like a decimal but does not fit exact arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfRange;

fn pow10(n: u8) -> Option<i128> {
    10i128.checked_pow(u32::from(n))
}

impl Decimal {
    /// Parses `[+-]?digits[.digits]` (no white space, no exponent). `Ok(None)`: not a decimal;
    /// `Err`: a decimal of more than 38 digits or more than [`MAX_SCALE`] fraction digits.
    pub fn parse(v: &[u8]) -> Result<Option<Decimal>, OutOfRange> {
        let (neg, digits) = match v.first() {
            Some(b'-') => (true, &v[1..]),
            Some(b'+') => (false, &v[1..]),
            _ => (false, v),
        };
        let (int, frac) = match digits.iter().position(|&b| b == b'.') {
            Some(p) => (&digits[..p], Some(&digits[p + 1..])),
            None => (digits, None),
        };
        let all_digits = |s: &[u8]| !s.is_empty() && s.iter().all(u8::is_ascii_digit);
        if !all_digits(int) || frac.is_some_and(|f| !all_digits(f)) {
            return Ok(None);
        }
        let frac = frac.unwrap_or_default();
        if frac.len() > usize::from(MAX_SCALE) {
            return Err(OutOfRange);
        }
        let mut m: i128 = 0;
        for &d in int.iter().chain(frac) {
            m = m
                .checked_mul(10)
                .and_then(|m| m.checked_add(i128::from(d - b'0')))
                .ok_or(OutOfRange)?;
        }
        Ok(Some(Decimal {
            mantissa: if neg { -m } else { m },
            scale: frac.len() as u8,
        }))
    }

    /// The mantissa at a larger (or equal) scale; `None` if it does not fit.
    fn mantissa_at(self, scale: u8) -> Option<i128> {
        self.mantissa
            .checked_mul(pow10(scale.checked_sub(self.scale)?)?)
    }

    /// The exact sum, at the larger scale of the two; `None` if it does not fit.
    pub fn checked_add(self, other: Decimal) -> Option<Decimal> {
        let scale = self.scale.max(other.scale);
        let m = self
            .mantissa_at(scale)?
            .checked_add(other.mantissa_at(scale)?)?;
        Some(Decimal { mantissa: m, scale })
    }

    /// Compares the values; equal values compare by scale (more fraction digits is greater),
    /// so that MIN and MAX do not depend on the order values come in.
    pub fn total_cmp(&self, other: &Decimal) -> Ordering {
        let scale = self.scale.max(other.scale);
        let by_value = match (self.mantissa_at(scale), other.mantissa_at(scale)) {
            (Some(a), Some(b)) => a.cmp(&b),
            // Rescaling overflows only for the one with fewer fraction digits, and then its
            // magnitude is larger than the other's: its sign decides.
            (None, _) => self.mantissa.cmp(&0),
            (_, None) => 0.cmp(&other.mantissa),
        };
        by_value.then(self.scale.cmp(&other.scale))
    }
}

impl std::fmt::Display for Decimal {
    /// No plus sign, no leading zeros, exactly `scale` fraction digits.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let digits = self.mantissa.unsigned_abs().to_string();
        let scale = usize::from(self.scale);
        let digits = format!("{digits:0>width$}", width = scale + 1);
        let (int, frac) = digits.split_at(digits.len() - scale);
        if self.mantissa < 0 {
            f.write_str("-")?;
        }
        f.write_str(int)?;
        if scale > 0 {
            write!(f, ".{frac}")?;
        }
        Ok(())
    }
}

/// One column's part of an aggregate over some cells.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ColumnPartial {
    /// Cells whose value is a decimal number (those out of range included).
    pub count: u64,
    /// The exact sum of the numbers (scale: the largest of theirs); meaningless when
    /// `out_of_range` or `sum_overflow`.
    pub sum: Decimal,
    pub min: Option<Decimal>,
    pub max: Option<Decimal>,
    /// Cells whose value is not a decimal number (not aggregated, reported).
    pub non_numeric: u64,
    /// A value does not fit exact arithmetic: SUM, AVG, MIN and MAX are errors.
    pub out_of_range: bool,
    /// The sum does not fit exact arithmetic: SUM and AVG are errors.
    pub sum_overflow: bool,
}

impl ColumnPartial {
    /// Adds one cell's value.
    pub fn add_value(&mut self, v: &[u8]) {
        match Decimal::parse(v) {
            Ok(Some(d)) => self.add(d),
            Ok(None) => self.non_numeric += 1,
            Err(OutOfRange) => {
                self.count += 1;
                self.out_of_range = true;
            }
        }
    }

    fn add(&mut self, d: Decimal) {
        self.count += 1;
        match self.sum.checked_add(d) {
            Some(s) => self.sum = s,
            None => self.sum_overflow = true,
        }
        let keep = |cur: &mut Option<Decimal>, better: Ordering| {
            if cur.is_none_or(|c| d.total_cmp(&c) == better) {
                *cur = Some(d);
            }
        };
        keep(&mut self.min, Ordering::Less);
        keep(&mut self.max, Ordering::Greater);
    }

    /// Adds another part of the same column.
    pub fn merge(&mut self, o: &ColumnPartial) {
        self.count += o.count;
        self.non_numeric += o.non_numeric;
        self.out_of_range |= o.out_of_range;
        self.sum_overflow |= o.sum_overflow;
        match self.sum.checked_add(o.sum) {
            Some(s) => self.sum = s,
            None => self.sum_overflow = true,
        }
        for (mine, theirs, better) in [
            (&mut self.min, o.min, Ordering::Less),
            (&mut self.max, o.max, Ordering::Greater),
        ] {
            if let Some(t) = theirs
                && mine.is_none_or(|m| t.total_cmp(&m) == better)
            {
                *mine = Some(t);
            }
        }
    }

    /// `sum / count` rounded half to even at `max(scale of the sum, 6)` fraction digits, with
    /// trailing zeros (and a bare point) left out; `None` without numbers.
    pub fn average(&self) -> Option<String> {
        if self.count == 0 {
            return None;
        }
        let n = u128::from(self.count);
        let scale = self.sum.scale.max(6);
        let m = self.sum.mantissa.unsigned_abs();
        // Long division of |sum| (at its own scale) by the count: the integer part of the
        // quotient, then one fraction digit at a time (the remainder stays below the count).
        let (q, mut rem) = (m / n, m % n);
        let mut digits = Vec::with_capacity(usize::from(scale));
        let mut frac: u128 = 0;
        let mut int = q;
        // The quotient of m / n is at scale `sum.scale`; digits beyond it come from the
        // remainder. Move the quotient's own fraction digits over first.
        let own = u32::from(self.sum.scale);
        let unit = 10u128.pow(own);
        let own_frac = int % unit;
        int /= unit;
        for i in (0..own).rev() {
            digits.push(((own_frac / 10u128.pow(i)) % 10) as u8);
        }
        for _ in own..u32::from(scale) {
            rem *= 10;
            digits.push((rem / n) as u8);
            rem %= n;
        }
        for d in &digits {
            frac = frac * 10 + u128::from(*d);
        }
        let last_odd = frac % 2 == 1;
        let up = match (rem * 2).cmp(&n) {
            Ordering::Greater => true,
            Ordering::Equal => last_odd,
            Ordering::Less => false,
        };
        let full = 10u128.pow(u32::from(scale));
        if up {
            frac += 1;
            if frac == full {
                frac = 0;
                int += 1;
            }
        }
        let mut s = String::new();
        if self.sum.mantissa < 0 && (int != 0 || frac != 0) {
            s.push('-');
        }
        s.push_str(&int.to_string());
        let f = format!("{frac:0>width$}", width = usize::from(scale));
        let f = f.trim_end_matches('0');
        if !f.is_empty() {
            s.push('.');
            s.push_str(f);
        }
        Some(s)
    }
}

/// An aggregate over some cells: rows counted, one [`ColumnPartial`] per column of the
/// [`Aggregate`], in its order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AggregatePartial {
    /// Distinct rows with a cell folded.
    pub rows: u64,
    /// Cells folded (every version given, of every column).
    pub cells: u64,
    pub columns: Vec<ColumnPartial>,
}

impl AggregatePartial {
    /// Nothing yet, for `agg`'s columns.
    pub fn empty(agg: &Aggregate) -> Self {
        Self {
            rows: 0,
            cells: 0,
            columns: vec![ColumnPartial::default(); agg.columns.len()],
        }
    }

    /// Adds the partial of other cells (other rows: a row lies in one range) of the same
    /// aggregate. Partials of different column counts are refused.
    pub fn merge(&mut self, o: &AggregatePartial) -> Result<(), String> {
        if o.columns.len() != self.columns.len() {
            return Err(format!(
                "a partial aggregate has {} columns, not {}",
                o.columns.len(),
                self.columns.len()
            ));
        }
        self.rows += o.rows;
        self.cells += o.cells;
        for (m, t) in self.columns.iter_mut().zip(&o.columns) {
            m.merge(t);
        }
        Ok(())
    }

    /// The value `f` of column `column` (ignored for `CountRows`) as printed: counts as
    /// integers, `NULL` for SUM, AVG, MIN and MAX without numbers. `name` names the column in
    /// the error of a value or sum out of exact range.
    pub fn render(&self, f: AggregateFn, column: usize, name: &str) -> Result<String, String> {
        if f == AggregateFn::CountRows {
            return Ok(self.rows.to_string());
        }
        let c = self
            .columns
            .get(column)
            .ok_or_else(|| format!("{}({name}): no such aggregated column", f.name()))?;
        if f == AggregateFn::Count {
            return Ok(c.count.to_string());
        }
        if c.out_of_range {
            return Err(format!(
                "{}({name}): a value is out of exact range (at most 38 digits, {MAX_SCALE} of \
                 them after the point)",
                f.name(),
            ));
        }
        if c.sum_overflow && matches!(f, AggregateFn::Sum | AggregateFn::Avg) {
            return Err(format!(
                "{}({name}): the sum is out of exact range (at most 38 digits, {MAX_SCALE} of \
                 them after the point)",
                f.name(),
            ));
        }
        let null = || "NULL".to_string();
        Ok(match f {
            AggregateFn::Sum if c.count > 0 => c.sum.to_string(),
            AggregateFn::Avg => c.average().unwrap_or_else(null),
            AggregateFn::Min => c.min.map_or_else(null, |d| d.to_string()),
            AggregateFn::Max => c.max.map_or_else(null, |d| d.to_string()),
            _ => null(),
        })
    }
}

/// Folds a scan's cells, in key order, into an [`AggregatePartial`].
pub struct AggregateFold {
    agg: Aggregate,
    partial: AggregatePartial,
    row: Vec<u8>,
    in_row: bool,
    /// The newest version so far of the current cell, if an aggregated column holds it.
    pending: Option<Pending>,
}

struct Pending {
    family: u8,
    qualifier: Vec<u8>,
    timestamp: i64,
    value: Vec<u8>,
}

impl AggregateFold {
    pub fn new(agg: &Aggregate) -> Self {
        Self {
            partial: AggregatePartial::empty(agg),
            agg: agg.clone(),
            row: Vec::new(),
            in_row: false,
            pending: None,
        }
    }

    /// Adds one cell (an insert); cells come in key order, so a cell's versions are adjacent.
    pub fn cell(&mut self, row: &[u8], family: u8, qualifier: &[u8], timestamp: i64, v: &[u8]) {
        self.partial.cells += 1;
        if !self.in_row || self.row != row {
            self.flush();
            self.partial.rows += 1;
            self.row.clear();
            self.row.extend_from_slice(row);
            self.in_row = true;
        }
        if let Some(p) = &mut self.pending
            && p.family == family
            && p.qualifier == qualifier
        {
            // TIME_ORDER DESC families return a cell's versions oldest first.
            if timestamp > p.timestamp {
                p.timestamp = timestamp;
                p.value.clear();
                p.value.extend_from_slice(v);
            }
            return;
        }
        self.flush();
        if self
            .agg
            .columns
            .iter()
            .any(|c| c.matches(family, qualifier))
        {
            self.pending = Some(Pending {
                family,
                qualifier: qualifier.to_vec(),
                timestamp,
                value: v.to_vec(),
            });
        }
    }

    fn flush(&mut self) {
        let Some(p) = self.pending.take() else {
            return;
        };
        for (c, part) in self.agg.columns.iter().zip(&mut self.partial.columns) {
            if c.matches(p.family, &p.qualifier) {
                part.add_value(&p.value);
            }
        }
    }

    /// The partial of every cell given.
    pub fn finish(mut self) -> AggregatePartial {
        self.flush();
        self.partial
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        Decimal::parse(s.as_bytes())
            .expect("in range")
            .expect("a number")
    }

    fn avg(values: &[&str]) -> Option<String> {
        let mut c = ColumnPartial::default();
        for v in values {
            c.add_value(v.as_bytes());
        }
        c.average()
    }

    #[test]
    fn decimals_parse_exactly_or_not_at_all() {
        assert_eq!(d("007").to_string(), "7");
        assert_eq!(d("-1.50").to_string(), "-1.50");
        assert_eq!(d("+0.001").to_string(), "0.001");
        assert_eq!(d("-0").to_string(), "0");
        for bad in [
            "", "-", "1.", ".5", " 1", "1 ", "1e3", "0x10", "1.2.3", "--1", "NaN",
        ] {
            assert_eq!(Decimal::parse(bad.as_bytes()), Ok(None), "{bad:?}");
        }
        assert_eq!(Decimal::parse(b"0.1234567890123456789"), Err(OutOfRange));
        assert!(Decimal::parse(&[b'9'; 38]).is_ok());
        assert_eq!(Decimal::parse(&[b'9'; 39]), Err(OutOfRange));
    }

    #[test]
    fn sums_keep_the_largest_scale_and_refuse_overflow() {
        assert_eq!(d("1.5").checked_add(d("2.25")), Some(d("3.75")));
        assert_eq!(d("1.50").checked_add(d("2.5")).unwrap().to_string(), "4.00");
        let big = Decimal {
            mantissa: i128::MAX / 2 + 1,
            scale: 0,
        };
        assert_eq!(big.checked_add(big), None);
        assert_eq!(big.checked_add(d("0.5")), None);
    }

    #[test]
    fn comparisons_are_numeric_then_by_scale() {
        assert_eq!(d("1.5").total_cmp(&d("1.25")), Ordering::Greater);
        assert_eq!(d("-2").total_cmp(&d("1")), Ordering::Less);
        assert_eq!(d("1.0").total_cmp(&d("1")), Ordering::Greater);
        let huge = Decimal {
            mantissa: i128::MAX,
            scale: 0,
        };
        assert_eq!(huge.total_cmp(&d("0.5")), Ordering::Greater);
        assert_eq!(d("0.5").total_cmp(&huge), Ordering::Less);
        let neg = Decimal {
            mantissa: -i128::MAX,
            scale: 0,
        };
        assert_eq!(neg.total_cmp(&d("-0.5")), Ordering::Less);
    }

    #[test]
    fn averages_round_half_to_even_and_trim_zeros() {
        assert_eq!(avg(&["1", "2"]).as_deref(), Some("1.5"));
        assert_eq!(avg(&["1", "2", "2"]).as_deref(), Some("1.666667"));
        assert_eq!(avg(&["1.50", "2.50"]).as_deref(), Some("2"));
        assert_eq!(avg(&["-1", "-2"]).as_deref(), Some("-1.5"));
        // 0.0000005 and 0.0000015 round to even.
        assert_eq!(avg(&["0.000001", "0"]).as_deref(), Some("0"));
        assert_eq!(avg(&["0.000003", "0"]).as_deref(), Some("0.000002"));
        assert_eq!(avg(&["-0.000001", "0"]).as_deref(), Some("0"));
        assert_eq!(avg(&["0.9999999", "1"]).as_deref(), Some("1"));
        assert_eq!(avg(&["0.9999997", "1"]).as_deref(), Some("0.9999998"));
        assert_eq!(avg(&["2", "0", "0"]).as_deref(), Some("0.666667"));
        assert_eq!(
            avg(&["0.9999995", "0.9999995"]).as_deref(),
            Some("0.9999995")
        );
        assert_eq!(avg(&["1", "1", "1", "0.9999999"]).as_deref(), Some("1"));
        assert_eq!(
            avg(&["1", "1", "1", "0.9999989"]).as_deref(),
            Some("0.9999997")
        );
        assert_eq!(avg(&["x"]), None);
        let max = i128::MAX.to_string();
        assert_eq!(avg(&[&max]).as_deref(), Some(max.as_str()));
    }

    #[test]
    fn a_fold_takes_the_newest_version_and_counts_rows() {
        let agg = Aggregate {
            columns: vec![
                AggregateColumn {
                    family: 1,
                    qualifier: None,
                },
                AggregateColumn {
                    family: 1,
                    qualifier: Some(b"q".to_vec()),
                },
            ],
        };
        let mut f = AggregateFold::new(&agg);
        f.cell(b"a", 1, b"q", 20, b"5");
        f.cell(b"a", 1, b"q", 10, b"7");
        f.cell(b"a", 2, b"", 10, b"x");
        // Oldest first (TIME_ORDER DESC): the newest is the last.
        f.cell(b"b", 1, b"r", 10, b"1");
        f.cell(b"b", 1, b"r", 30, b"zz");
        f.cell(b"c", 2, b"", 1, b"1");
        let p = f.finish();
        assert_eq!((p.rows, p.cells), (3, 6));
        assert_eq!(p.columns[0].count, 1);
        assert_eq!(p.columns[0].non_numeric, 1);
        assert_eq!(p.columns[0].sum, d("5"));
        assert_eq!(p.columns[1].count, 1);
        assert_eq!(p.render(AggregateFn::Max, 1, "f:q").unwrap(), "5");
        let mut twice = p.clone();
        twice.merge(&p).unwrap();
        assert_eq!(twice.render(AggregateFn::Sum, 0, "f").unwrap(), "10");
        assert_eq!(twice.render(AggregateFn::CountRows, 0, "").unwrap(), "6");
        let empty = AggregatePartial::empty(&agg);
        assert_eq!(empty.render(AggregateFn::Count, 0, "f").unwrap(), "0");
        assert_eq!(empty.render(AggregateFn::Sum, 0, "f").unwrap(), "NULL");
        assert_eq!(empty.render(AggregateFn::Avg, 0, "f").unwrap(), "NULL");
        assert_eq!(empty.render(AggregateFn::Min, 1, "f").unwrap(), "NULL");
    }
}

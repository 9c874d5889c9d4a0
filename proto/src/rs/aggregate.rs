//! The wire form of server-side aggregates: what a scan aggregates (`ScanSpec.aggregate`, field
//! 19 of `WireScanSpec`) and the partial a server answers with instead of cells (field 5 of
//! `ScanBlock`). docs/formats/rangeserver-rpc.md.

use common::aggregate::{Aggregate, AggregateColumn, AggregatePartial, ColumnPartial, Decimal};

use super::messages::family_from_wire;

/// One aggregated column: a family, and one qualifier when present (absent: all of them).
#[derive(Clone, PartialEq, prost::Message)]
pub struct WireAggregateColumn {
    #[prost(uint32, tag = "1")]
    pub family: u32,
    #[prost(bytes = "vec", optional, tag = "2")]
    pub qualifier: Option<Vec<u8>>,
}

/// `Aggregate`: the scan's rows are counted and each column gets a partial.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WireAggregate {
    #[prost(message, repeated, tag = "1")]
    pub columns: Vec<WireAggregateColumn>,
}

/// An exact decimal: the i128 mantissa in two halves, and its scale (fraction digits).
#[derive(Clone, PartialEq, prost::Message)]
pub struct WireDecimal {
    #[prost(int64, tag = "1")]
    pub hi: i64,
    #[prost(uint64, tag = "2")]
    pub lo: u64,
    #[prost(uint32, tag = "3")]
    pub scale: u32,
}

/// One column's partial (`ColumnPartial`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct WireColumnPartial {
    #[prost(uint64, tag = "1")]
    pub count: u64,
    #[prost(message, optional, tag = "2")]
    pub sum: Option<WireDecimal>,
    #[prost(message, optional, tag = "3")]
    pub min: Option<WireDecimal>,
    #[prost(message, optional, tag = "4")]
    pub max: Option<WireDecimal>,
    #[prost(uint64, tag = "5")]
    pub non_numeric: u64,
    #[prost(bool, tag = "6")]
    pub out_of_range: bool,
    #[prost(bool, tag = "7")]
    pub sum_overflow: bool,
}

/// `AggregatePartial`: what one piece of a scan folded to.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WireAggregatePartial {
    #[prost(uint64, tag = "1")]
    pub rows: u64,
    #[prost(uint64, tag = "2")]
    pub cells: u64,
    #[prost(message, repeated, tag = "3")]
    pub columns: Vec<WireColumnPartial>,
}

impl From<&Aggregate> for WireAggregate {
    fn from(a: &Aggregate) -> Self {
        Self {
            columns: a
                .columns
                .iter()
                .map(|c| WireAggregateColumn {
                    family: c.family.into(),
                    qualifier: c.qualifier.clone(),
                })
                .collect(),
        }
    }
}

impl TryFrom<WireAggregate> for Aggregate {
    type Error = String;
    fn try_from(w: WireAggregate) -> Result<Self, String> {
        let columns = w
            .columns
            .into_iter()
            .enumerate()
            .map(|(n, c)| {
                Ok(AggregateColumn {
                    family: family_from_wire(c.family)
                        .map_err(|e| format!("aggregate column {n}: {e}"))?,
                    qualifier: c.qualifier,
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(Aggregate { columns })
    }
}

impl From<Decimal> for WireDecimal {
    fn from(d: Decimal) -> Self {
        Self {
            hi: (d.mantissa >> 64) as i64,
            lo: d.mantissa as u64,
            scale: d.scale.into(),
        }
    }
}

impl TryFrom<WireDecimal> for Decimal {
    type Error = String;
    fn try_from(w: WireDecimal) -> Result<Self, String> {
        let scale = u8::try_from(w.scale)
            .ok()
            .filter(|&s| s <= common::aggregate::MAX_SCALE)
            .ok_or_else(|| format!("a decimal's scale {} is above 18", w.scale))?;
        Ok(Decimal {
            mantissa: (i128::from(w.hi) << 64) | i128::from(w.lo),
            scale,
        })
    }
}

impl From<&AggregatePartial> for WireAggregatePartial {
    fn from(p: &AggregatePartial) -> Self {
        Self {
            rows: p.rows,
            cells: p.cells,
            columns: p
                .columns
                .iter()
                .map(|c| WireColumnPartial {
                    count: c.count,
                    sum: Some(c.sum.into()),
                    min: c.min.map(WireDecimal::from),
                    max: c.max.map(WireDecimal::from),
                    non_numeric: c.non_numeric,
                    out_of_range: c.out_of_range,
                    sum_overflow: c.sum_overflow,
                })
                .collect(),
        }
    }
}

impl TryFrom<WireAggregatePartial> for AggregatePartial {
    type Error = String;
    fn try_from(w: WireAggregatePartial) -> Result<Self, String> {
        let dec = |d: Option<WireDecimal>| d.map(Decimal::try_from).transpose();
        let columns = w
            .columns
            .into_iter()
            .map(|c| {
                Ok(ColumnPartial {
                    count: c.count,
                    sum: dec(c.sum)?.unwrap_or_default(),
                    min: dec(c.min)?,
                    max: dec(c.max)?,
                    non_numeric: c.non_numeric,
                    out_of_range: c.out_of_range,
                    sum_overflow: c.sum_overflow,
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(AggregatePartial {
            rows: w.rows,
            cells: w.cells,
            columns,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partials_round_trip_with_extreme_mantissas() {
        for m in [0, 1, -1, i128::MAX, i128::MIN, 1 << 64, -(1 << 64) - 7] {
            let d = Decimal {
                mantissa: m,
                scale: 3,
            };
            assert_eq!(Decimal::try_from(WireDecimal::from(d)), Ok(d));
        }
        let p = AggregatePartial {
            rows: 3,
            cells: 9,
            columns: vec![ColumnPartial {
                count: 2,
                sum: Decimal {
                    mantissa: -15,
                    scale: 1,
                },
                min: Some(Decimal {
                    mantissa: -20,
                    scale: 1,
                }),
                max: None,
                non_numeric: 4,
                out_of_range: true,
                sum_overflow: false,
            }],
        };
        assert_eq!(
            AggregatePartial::try_from(WireAggregatePartial::from(&p)),
            Ok(p)
        );
        let bad = WireDecimal {
            hi: 0,
            lo: 1,
            scale: 19,
        };
        assert!(Decimal::try_from(bad).is_err());
    }
}

//! Conversions between the engine's meta-log records and their wire form
//! (`proto::rs::messages::RangeRecord`): the same facts, two formats that change separately.

use proto::rs::messages as wire;

use crate::meta::{GroupRecord, RangeRecord};

impl From<&RangeRecord> for wire::RangeRecord {
    fn from(r: &RangeRecord) -> Self {
        Self {
            id: r.id,
            table_id: r.table_id,
            start_row: r.start_row.clone(),
            end_row: r.end_row.clone(),
            groups: r.groups.iter().map(wire::GroupRecord::from).collect(),
        }
    }
}

impl From<&GroupRecord> for wire::GroupRecord {
    fn from(g: &GroupRecord) -> Self {
        Self {
            name: g.name.clone(),
            stores: g.stores.clone(),
            flushed_revision: g.flushed_revision,
            next_store: g.next_store,
        }
    }
}

impl From<&wire::RangeRecord> for RangeRecord {
    fn from(r: &wire::RangeRecord) -> Self {
        Self {
            id: r.id,
            table_id: r.table_id,
            start_row: r.start_row.clone(),
            end_row: r.end_row.clone(),
            groups: r.groups.iter().map(GroupRecord::from).collect(),
        }
    }
}

impl From<&wire::GroupRecord> for GroupRecord {
    fn from(g: &wire::GroupRecord) -> Self {
        Self {
            name: g.name.clone(),
            stores: g.stores.clone(),
            flushed_revision: g.flushed_revision,
            next_store: g.next_store,
        }
    }
}

impl From<RangeRecord> for wire::RangeRecord {
    fn from(r: RangeRecord) -> Self {
        (&r).into()
    }
}

impl From<wire::RangeRecord> for RangeRecord {
    fn from(r: wire::RangeRecord) -> Self {
        (&r).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;

    #[test]
    fn a_range_record_survives_the_wire() {
        for (start, end) in [
            (None, None),
            (Some(b"".to_vec()), Some(b"m".to_vec())),
            (Some(b"a\x00b".to_vec()), None),
        ] {
            let rec = RangeRecord {
                id: 7,
                table_id: 3,
                start_row: start,
                end_row: end,
                groups: vec![
                    GroupRecord {
                        name: "default".into(),
                        stores: vec!["/t/3/default/7/cs1".into(), "/t/3/default/7/cs2".into()],
                        flushed_revision: -5,
                        next_store: 3,
                    },
                    GroupRecord {
                        name: "b".into(),
                        stores: vec![],
                        flushed_revision: i64::MAX,
                        next_store: 0,
                    },
                ],
            };
            let bytes = wire::RangeRecord::from(&rec).encode_to_vec();
            let back = RangeRecord::from(wire::RangeRecord::decode(bytes.as_slice()).unwrap());
            assert_eq!(back, rec);
        }
    }
}

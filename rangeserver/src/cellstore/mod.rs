//! Cell store format v1: writer, reader and scanner (docs/formats/cellstore.md).

//! Avro Object Container Files: the schema comes from each file's header (merged to the
//! widest type across files, as Parquet's footers are), and the file is read block by
//! block into batches (arrow-avro), so memory holds one block and one batch whatever the
//! file size. Types as Spark reads Avro: a union with null is a nullable column, any
//! other union a struct of its non-null branches (`member0`, `member1`, ...), `uuid` a
//! STRING, `decimal`, `date` and `timestamp-millis`/`-micros` (a UTC TIMESTAMP) as they
//! are. Each batch is then made one of the stream's layout as Parquet's is
//! ([`super::conform::conform`]): a value that does not fit is rescued.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, FixedSizeBinaryArray, ListArray, MapArray, RecordBatch, StringArray,
    StructArray, UInt32Array, UnionArray,
};
use arrow_avro::codec::Tz;
use arrow_avro::reader::{Reader, ReaderBuilder};
use arrow_buffer::NullBuffer;
use arrow_schema::{ArrowError, DataType as ArrowType, Field as ArrowField, Fields, Schema};

use super::input::READ_BUFFER;
use super::sink::Sink;
use super::{BATCH_ROWS, DecodeError, DecodeOptions, FileStats, SourceFile};
use crate::record::TableLayout;
use crate::schema::DataType;
use crate::schema::infer::{Inferred, SchemaInferrer};

fn corrupt(path: &str, e: &dyn std::fmt::Display) -> DecodeError {
    DecodeError::Corrupt {
        path: path.to_string(),
        line: None,
        reason: format!("not a readable Avro object container file: {e}"),
    }
}

fn reader(file: &SourceFile) -> Result<Reader<BufReader<File>>, DecodeError> {
    let f = super::open_listed(file)?;
    ReaderBuilder::new()
        .with_batch_size(BATCH_ROWS)
        .with_tz(Tz::Utc)
        .build(BufReader::with_capacity(READ_BUFFER, f))
        .map_err(|e| corrupt(&file.meta.path, &e))
}

/// The stream type of a file column: its own, or STRING when Delta has no such type.
fn column_type(t: &ArrowType) -> DataType {
    DataType::from_arrow(t).unwrap_or(DataType::String)
}

/// Observes the file's schema (its header) and returns its record count (from the blocks'
/// headers: the records themselves are not decoded).
pub fn infer(file: &SourceFile, inferrer: &mut SchemaInferrer) -> Result<u64, DecodeError> {
    let schema = reader(file)?.schema();
    for field in schema.fields() {
        let field = spark_field(field);
        inferrer.add_typed(
            field.name(),
            Inferred::from_type(&column_type(field.data_type())),
        );
    }
    count_records(file)
}

/// Sums the record counts of the file's blocks, skipping their data; a block cut short
/// (which the block reader would take for the end of the file) is an error.
fn count_records(file: &SourceFile) -> Result<u64, DecodeError> {
    let path = file.meta.path.as_str();
    let bad = |e: &dyn std::fmt::Display| corrupt(path, e);
    let f = super::open_listed(file)?;
    let len = f
        .metadata()
        .map_err(|source| DecodeError::Io {
            path: path.to_string(),
            source,
        })?
        .len();
    let mut f = BufReader::with_capacity(64 << 10, f);
    let info = arrow_avro::reader::read_header_info(&mut f).map_err(|e| bad(&e))?;
    f.seek(SeekFrom::Start(info.header_len()))
        .map_err(|e| bad(&e))?;
    let mut records = 0u64;
    loop {
        let at = f.stream_position().map_err(|e| bad(&e))?;
        if at > len {
            return Err(bad(&format_args!(
                "its last block is cut short ({len} bytes, the block ends at byte {at})"
            )));
        }
        if f.fill_buf().map_err(|e| bad(&e))?.is_empty() {
            return Ok(records);
        }
        let count = read_long(&mut f).map_err(|e| bad(&e))?;
        let size = read_long(&mut f).map_err(|e| bad(&e))?;
        let Ok(count) = u64::try_from(count) else {
            return Err(bad(&"a block has a negative record count"));
        };
        if size < 0 {
            return Err(bad(&"a block has a negative size"));
        }
        // The block's data, then its 16-byte sync marker.
        f.seek_relative(size.saturating_add(16))
            .map_err(|e| bad(&e))?;
        records = records.saturating_add(count);
    }
}

/// An Avro `long`: a zig-zag variable-length integer.
fn read_long(r: &mut impl Read) -> std::io::Result<i64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let mut byte = [0u8];
        r.read_exact(&mut byte)?;
        value |= u64::from(byte[0] & 0x7f) << shift;
        if byte[0] & 0x80 == 0 {
            return Ok(((value >> 1) as i64) ^ -((value & 1) as i64));
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "a block header's integer is too long",
    ))
}

/// Decodes the file into batches of the layout.
pub fn decode(
    file: &SourceFile,
    opts: &DecodeOptions,
    layout: &Arc<TableLayout>,
    emit: &mut dyn FnMut(RecordBatch) -> bool,
) -> Result<FileStats, DecodeError> {
    let path = file.meta.path.as_str();
    // The blocks' headers first: a file cut short stops here, before any row is emitted.
    let expected = count_records(file)?;
    let reader = reader(file)?;
    let mut sink = Sink::new(file, opts, layout, emit);
    let mut one = |batch: RecordBatch| -> Result<(), DecodeError> {
        sink.push_batch(&spark_batch(&batch).map_err(|e| corrupt(path, &e))?)
    };
    if reader.schema().fields().iter().any(|f| has_union(f)) {
        // arrow-avro 59's union decoder keeps counting its offsets across batches, so a
        // second batch from one reader fails: each block gets a reader of its own (memory
        // still holds one block and its batch).
        for_each_block(file, &mut |bytes, count| {
            let r = ReaderBuilder::new()
                .with_batch_size(count.max(1))
                .with_tz(Tz::Utc)
                .build(std::io::Cursor::new(bytes))
                .map_err(|e| corrupt(path, &e))?;
            for batch in r {
                one(batch.map_err(|e| corrupt(path, &e))?)?;
            }
            Ok(())
        })?;
    } else {
        for batch in reader {
            one(batch.map_err(|e| corrupt(path, &e))?)?;
        }
    }
    sink.finish_expecting(expected, |read| {
        corrupt(
            path,
            &format_args!("its blocks hold {expected} records, {read} were read"),
        )
    })
}

/// Whether the field holds a union other than with null (an Arrow union).
fn has_union(f: &ArrowField) -> bool {
    match f.data_type() {
        ArrowType::Union(_, _) => true,
        ArrowType::Struct(fields) => fields.iter().any(|c| has_union(c)),
        ArrowType::List(c) | ArrowType::Map(c, _) => has_union(c),
        _ => false,
    }
}

/// Hands each block, as a container file of its own (the header then the block), to
/// `each` with its record count.
fn for_each_block(
    file: &SourceFile,
    each: &mut dyn FnMut(Vec<u8>, usize) -> Result<(), DecodeError>,
) -> Result<(), DecodeError> {
    let path = file.meta.path.as_str();
    let bad = |e: &dyn std::fmt::Display| corrupt(path, e);
    let mut f = BufReader::with_capacity(READ_BUFFER, super::open_listed(file)?);
    let info = arrow_avro::reader::read_header_info(&mut f).map_err(|e| bad(&e))?;
    f.seek(SeekFrom::Start(0)).map_err(|e| bad(&e))?;
    let header_len = usize::try_from(info.header_len()).map_err(|e| bad(&e))?;
    let mut header = vec![0u8; header_len];
    f.read_exact(&mut header).map_err(|e| bad(&e))?;
    loop {
        if f.fill_buf().map_err(|e| bad(&e))?.is_empty() {
            return Ok(());
        }
        let count = read_long(&mut f).map_err(|e| bad(&e))?;
        let size = read_long(&mut f).map_err(|e| bad(&e))?;
        let (Ok(count), Ok(size)) = (usize::try_from(count), usize::try_from(size)) else {
            return Err(bad(&"a block has a negative count or size"));
        };
        // Checked against the file's length by `count_records` first; again here, so a
        // block's claimed size never allocates more than the file holds.
        if size as u64 > file.meta.size {
            return Err(bad(&"a block is larger than the file"));
        }
        let mut bytes = header.clone();
        for v in [count as i64, size as i64] {
            write_long(&mut bytes, v);
        }
        let start = bytes.len();
        bytes.resize(start.saturating_add(size).saturating_add(16), 0);
        f.read_exact(&mut bytes[start..]).map_err(|e| bad(&e))?;
        each(bytes, count)?;
    }
}

/// Writes an Avro `long` (zig-zag, variable length).
fn write_long(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        let byte = (z & 0x7f) as u8;
        z >>= 7;
        if z == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn is_uuid(f: &ArrowField) -> bool {
    matches!(f.data_type(), ArrowType::FixedSizeBinary(16))
        && f.metadata().get("logicalType").map(String::as_str) == Some("uuid")
}

/// Whether the field (or anything in it) reads differently as Spark has it.
fn needs_change(f: &ArrowField) -> bool {
    is_uuid(f)
        || match f.data_type() {
            ArrowType::Union(_, _) => true,
            ArrowType::Struct(fields) => fields.iter().any(|c| needs_change(c)),
            ArrowType::List(c) | ArrowType::Map(c, _) => needs_change(c),
            _ => false,
        }
}

/// The field as Spark reads it: unions other than with null as structs of their non-null
/// branches, `uuid` as a string.
fn spark_field(f: &ArrowField) -> ArrowField {
    if !needs_change(f) {
        return f.clone();
    }
    if is_uuid(f) {
        return ArrowField::new(f.name(), ArrowType::Utf8, true);
    }
    let data_type = match f.data_type() {
        ArrowType::Union(fields, _) => {
            return ArrowField::new(f.name(), spark_union(fields), true).with_metadata(
                [(super::conform::UNION_STRUCT.to_string(), "true".to_string())].into(),
            );
        }
        ArrowType::Struct(fields) => ArrowType::Struct(spark_fields(fields)),
        ArrowType::List(c) => ArrowType::List(Arc::new(spark_field(c))),
        ArrowType::Map(c, sorted) => ArrowType::Map(Arc::new(spark_field(c)), *sorted),
        other => other.clone(),
    };
    ArrowField::new(f.name(), data_type, true)
}

/// A union's branches as Spark reads them: a struct of its non-null branches.
fn spark_union(fields: &arrow_schema::UnionFields) -> ArrowType {
    ArrowType::Struct(
        fields
            .iter()
            .filter(|(_, c)| c.data_type() != &ArrowType::Null)
            .enumerate()
            .map(|(i, (_, c))| {
                let c = spark_field(c);
                ArrowField::new(format!("member{i}"), c.data_type().clone(), true)
            })
            .collect(),
    )
}

fn spark_fields(fields: &Fields) -> Fields {
    fields.iter().map(|c| spark_field(c)).collect()
}

fn spark_batch(batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    let schema = batch.schema();
    if !schema.fields().iter().any(|f| needs_change(f)) {
        return Ok(batch.clone());
    }
    let columns = schema
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(f, a)| spark_array(f, a))
        .collect::<Result<Vec<_>, _>>()?;
    let fields = spark_fields(schema.fields());
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
}

fn downcast<'a, T: 'static>(a: &'a ArrayRef, what: &str) -> Result<&'a T, ArrowError> {
    a.as_any()
        .downcast_ref::<T>()
        .ok_or_else(|| ArrowError::CastError(format!("expected {what}, got {}", a.data_type())))
}

/// One column (of field `f`) as [`spark_field`] has its type.
fn spark_array(f: &ArrowField, a: &ArrayRef) -> Result<ArrayRef, ArrowError> {
    if !needs_change(f) {
        return Ok(Arc::clone(a));
    }
    if is_uuid(f) {
        let bytes = downcast::<FixedSizeBinaryArray>(a, "uuid bytes")?;
        let texts: StringArray = bytes
            .iter()
            .map(|v| {
                v.and_then(|b| uuid::Uuid::from_slice(b).ok())
                    .map(|u| u.hyphenated().to_string())
            })
            .collect();
        return Ok(Arc::new(texts));
    }
    let out = spark_field(f);
    Ok(match (a.data_type(), out.data_type()) {
        (ArrowType::Union(fields, _), ArrowType::Struct(out_fields)) => {
            let union = downcast::<UnionArray>(a, "a union")?;
            let type_ids = union.type_ids();
            let offsets = union.offsets();
            let mut columns = Vec::with_capacity(out_fields.len());
            let mut null_ids = Vec::new();
            for (id, child_field) in fields.iter() {
                if child_field.data_type() == &ArrowType::Null {
                    null_ids.push(id);
                    continue;
                }
                let indices: UInt32Array = (0..union.len())
                    .map(|r| {
                        (type_ids[r] == id).then(|| {
                            let i = offsets.map_or(r, |o| o[r] as usize);
                            i as u32
                        })
                    })
                    .collect();
                let taken = arrow_select::take::take(union.child(id), &indices, None)?;
                columns.push(spark_array(child_field, &taken)?);
            }
            let nulls = (!null_ids.is_empty()).then(|| {
                NullBuffer::from_iter((0..union.len()).map(|r| !null_ids.contains(&type_ids[r])))
            });
            Arc::new(StructArray::try_new(out_fields.clone(), columns, nulls)?)
        }
        (ArrowType::Struct(fields), ArrowType::Struct(out_fields)) => {
            let s = downcast::<StructArray>(a, "a struct")?;
            let columns = fields
                .iter()
                .zip(s.columns())
                .map(|(c, a)| spark_array(c, a))
                .collect::<Result<Vec<_>, _>>()?;
            Arc::new(StructArray::try_new(
                out_fields.clone(),
                columns,
                s.nulls().cloned(),
            )?)
        }
        (ArrowType::List(item), ArrowType::List(out_item)) => {
            let l = downcast::<ListArray>(a, "a list")?;
            let values = spark_array(item, l.values())?;
            Arc::new(ListArray::try_new(
                Arc::clone(out_item),
                l.offsets().clone(),
                values,
                l.nulls().cloned(),
            )?)
        }
        (ArrowType::Map(entries, _), ArrowType::Map(out_entries, sorted)) => {
            let m = downcast::<MapArray>(a, "a map")?;
            let as_array: ArrayRef = Arc::new(m.entries().clone());
            let converted = spark_array(entries, &as_array)?;
            let converted = downcast::<StructArray>(&converted, "map entries")?.clone();
            Arc::new(MapArray::try_new(
                Arc::clone(out_entries),
                m.offsets().clone(),
                converted,
                m.nulls().cloned(),
                *sorted,
            )?)
        }
        (from, to) => {
            return Err(ArrowError::CastError(format!(
                "cannot read Avro {from} as {to}"
            )));
        }
    })
}

//! Deterministic sample data: an `orders` dataset partitioned by `date=`,
//! for the README's first command, the tests and the benchmarks. Same
//! arguments -> byte-identical files.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

/// Schema of the sample orders: one row per (re)delivered order event.
pub fn orders_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("event_id", DataType::Utf8, false),
        Field::new("order_id", DataType::Int64, false),
        Field::new("customer", DataType::Utf8, false),
        Field::new("amount", DataType::Float64, true),
        Field::new("quantity", DataType::Int64, false),
        Field::new("status", DataType::Utf8, false),
    ]))
}

/// splitmix64: a tiny deterministic generator; no entropy anywhere.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Rows `start..start+n` of the orders for `seed`. About 5% of rows
/// re-deliver an earlier event (same event_id), 1% have no amount.
pub fn orders_batch(seed: u64, start: u64, n: usize) -> RecordBatch {
    let mut event_id = Vec::with_capacity(n);
    let mut order_id = Vec::with_capacity(n);
    let mut customer = Vec::with_capacity(n);
    let mut amount = Vec::with_capacity(n);
    let mut quantity = Vec::with_capacity(n);
    let mut status = Vec::with_capacity(n);
    for i in start..start + n as u64 {
        let r = mix(seed ^ mix(i));
        // A re-delivery repeats the event of a recent row.
        let ev = if r.is_multiple_of(20) && i > 0 {
            i - 1 - (r >> 8) % i.min(100)
        } else {
            i
        };
        let e = mix(seed ^ mix(ev));
        event_id.push(format!("evt-{seed:x}-{ev:010}"));
        order_id.push(ev as i64);
        customer.push(format!("c-{:04}", e % 1000));
        amount.push(if (e >> 10).is_multiple_of(100) {
            None
        } else {
            Some(((e >> 20) % 100_000) as f64 / 100.0)
        });
        quantity.push(1 + ((e >> 40) % 5) as i64);
        status.push(["paid", "paid", "paid", "refunded", "pending"][((e >> 50) % 5) as usize]);
    }
    RecordBatch::try_new(
        orders_schema(),
        vec![
            Arc::new(StringArray::from(event_id)),
            Arc::new(Int64Array::from(order_id)),
            Arc::new(StringArray::from(customer)),
            Arc::new(Float64Array::from(amount)),
            Arc::new(Int64Array::from(quantity)),
            Arc::new(StringArray::from(status)),
        ],
    )
    .expect("sample columns match the sample schema")
}

/// Seed of a partition value, so every day has its own rows.
pub fn seed_of(value: &str) -> u64 {
    value.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// Write `rows` orders for `date` under `root/date=<date>/` as `files`
/// Parquet files. Returns the files written.
pub fn write_day(
    root: &Path,
    date: &str,
    rows: u64,
    files: usize,
) -> std::io::Result<Vec<PathBuf>> {
    let dir = root.join(format!("date={date}"));
    std::fs::create_dir_all(&dir)?;
    let files = files.max(1);
    let per_file = rows.div_ceil(files as u64);
    let seed = seed_of(date);
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let mut written = Vec::new();
    for f in 0..files {
        let start = f as u64 * per_file;
        let end = (start + per_file).min(rows);
        let path = dir.join(format!("part-{f:05}.parquet"));
        let file = std::fs::File::create(&path)?;
        let mut w = ArrowWriter::try_new(file, orders_schema(), Some(props.clone()))
            .map_err(std::io::Error::other)?;
        let mut at = start;
        while at < end {
            let n = (end - at).min(65_536) as usize;
            w.write(&orders_batch(seed, at, n))
                .map_err(std::io::Error::other)?;
            at += n as u64;
        }
        w.close().map_err(std::io::Error::other)?;
        written.push(path);
    }
    Ok(written)
}

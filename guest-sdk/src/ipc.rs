//! Arrow IPC stream glue shared by guest and host: how batches cross the
//! sandbox boundary. An empty byte string means "no rows".

use std::io::Cursor;

use arrow::buffer::Buffer;
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::ipc::reader::{StreamDecoder, StreamReader};
use arrow::ipc::writer::StreamWriter;
use arrow::record_batch::RecordBatch;

/// Encode a batch as one IPC stream. `None` encodes to nothing, which the
/// other side reads as "no rows". A zero-row batch is still encoded: it
/// tells the host the output's schema, so an output with no rows at all can
/// still create a table or empty a slice.
pub fn encode(batch: Option<&RecordBatch>) -> Result<Vec<u8>, ArrowError> {
    let Some(batch) = batch else {
        return Ok(Vec::new());
    };
    let mut w = StreamWriter::try_new(Vec::new(), &batch.schema())?;
    w.write(batch)?;
    w.into_inner()
}

/// Encode a schema as an IPC stream without batches.
pub fn encode_schema(schema: &SchemaRef) -> Result<Vec<u8>, ArrowError> {
    let w = StreamWriter::try_new(Vec::new(), schema)?;
    w.into_inner()
}

/// Decode a schema written by [`encode_schema`].
pub fn decode_schema(bytes: &[u8]) -> Result<SchemaRef, ArrowError> {
    Ok(StreamReader::try_new(Cursor::new(bytes), None)?.schema())
}

/// Decode one IPC stream into a single batch (several batches in one stream
/// are concatenated). Empty bytes decode to `None`. Takes the bytes by value:
/// arrays point into them (zero-copy) wherever the buffers are aligned,
/// which is what crossing the sandbox boundary mostly costs otherwise.
pub fn decode(bytes: Vec<u8>) -> Result<Option<RecordBatch>, ArrowError> {
    if bytes.is_empty() {
        return Ok(None);
    }
    let mut buffer = Buffer::from_vec(bytes);
    let mut decoder = StreamDecoder::new();
    let mut batches = Vec::new();
    while !buffer.is_empty() {
        match decoder.decode(&mut buffer)? {
            Some(b) => batches.push(b),
            None if buffer.is_empty() => break,
            None => {}
        }
    }
    decoder.finish()?;
    match batches.len() {
        0 => Ok(None),
        1 => Ok(batches.pop()),
        _ => arrow::compute::concat_batches(&batches[0].schema(), &batches).map(Some),
    }
}

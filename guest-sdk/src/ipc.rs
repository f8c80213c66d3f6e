//! Arrow IPC stream glue shared by guest and host: how batches cross the
//! sandbox boundary. An empty byte string means "no rows".
//!
//! Decoding treats its bytes as hostile, because the host decodes what a
//! guest returned. arrow's IPC reader trusts the message metadata and panics
//! on some malformed input (a buffer range past the body, an `Int` of 7 bits
//! in a schema, a stray variadic count), so every message is framed,
//! verified and checked against its schema here first; only then does
//! arrow's reader build (and fully validate) the arrays.

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::buffer::Buffer;
use arrow::datatypes::{
    DataType, Field, IntervalUnit, Schema, SchemaRef, TimeUnit, UnionFields, UnionMode,
};
use arrow::error::ArrowError;
use arrow::ipc as fb;
use arrow::ipc::reader::{FileDecoder, read_dictionary, read_record_batch};
use arrow::ipc::writer::StreamWriter;
use arrow::record_batch::RecordBatch;

/// Deepest type nesting accepted (flatbuffers' own verifier stops at 64
/// tables, so real schemas are far shallower).
const MAX_DEPTH: usize = 64;
/// Most slots one array or batch may claim: lengths are checked before
/// any size arithmetic so nothing overflows.
const MAX_LEN: i64 = i32::MAX as i64;
/// Views of at most this many bytes hold their data inline.
const MAX_INLINE_VIEW: u32 = 12;
/// Bytes per view in a Utf8View/BinaryView views buffer.
const VIEW_SIZE: usize = 16;

/// Encode a batch as one IPC stream. `None` encodes to nothing, which the
/// other side reads as "no rows". A zero-row batch is still encoded: it
/// tells the host the output's schema, so an output with no rows at all can
/// still create a table or empty a slice.
pub fn encode(batch: Option<&RecordBatch>) -> Result<Vec<u8>, ArrowError> {
    batch.map_or(Ok(Vec::new()), |b| encode_into(b, Vec::new()))
}

/// [`encode`] a batch into `buf` (emptied first), keeping its allocation:
/// the host encodes every input batch of a run into one buffer.
pub fn encode_into(batch: &RecordBatch, mut buf: Vec<u8>) -> Result<Vec<u8>, ArrowError> {
    buf.clear();
    let mut w = StreamWriter::try_new(buf, &batch.schema())?;
    w.write(batch)?;
    w.into_inner()
}

/// Decode a stream the host wrote: the guest's input. The host encodes
/// arrays it has already validated, and a guest trusts its host (never the
/// other way: the host decodes guest output with [`decode`]), so arrow's
/// per-array validation (offsets, UTF-8 of every string) is skipped here;
/// it would repeat, inside the sandbox, work the host has done.
///
/// Zero-copy: every array points into `bytes` where its buffers are aligned
/// for their type (arrow's writer pads every buffer to 64 bytes from the
/// stream's start, so that is where the guest's allocator put `bytes`;
/// a misaligned buffer is copied, never misread). arrow's `StreamReader` would zero a
/// fresh buffer per message body and copy the body into it, and parse and
/// verify the schema message again for every batch; here the schema is
/// parsed once per distinct schema message and reused.
pub fn decode_trusted(bytes: Vec<u8>) -> Result<Option<RecordBatch>, ArrowError> {
    if bytes.is_empty() {
        return Ok(None);
    }
    let data = Buffer::from_vec(bytes);
    let bytes = data.as_slice();
    let mut decoder: Option<(FileDecoder, SchemaRef)> = None;
    let mut batches = Vec::new();
    let mut pos = 0usize;
    while let Some(Framed {
        start,
        meta,
        message,
        body,
    }) = next_message(bytes, &mut pos)?
    {
        let block = fb::Block::new(start as i64, (body.start - start) as i32, body.len() as i64);
        let whole = data.slice_with_length(start, body.end - start);
        match (message.header_type(), decoder.as_mut()) {
            (fb::MessageHeader::Schema, None) => {
                let schema = trusted_schema(meta, message)?;
                // SAFETY: see above: the host wrote these arrays from valid
                // ones, and the guest trusts its host.
                let d = unsafe {
                    FileDecoder::new(schema.clone(), message.version()).with_skip_validation(true)
                };
                decoder = Some((d, schema));
            }
            (fb::MessageHeader::DictionaryBatch, Some((d, _))) => {
                d.read_dictionary(&block, &whole)?
            }
            (fb::MessageHeader::RecordBatch, Some((d, _))) => {
                batches.extend(d.read_record_batch(&block, &whole)?)
            }
            (fb::MessageHeader::NONE, _) => {}
            (other, _) => {
                return Err(ipc_error(format!(
                    "unexpected {other:?} message in the host's stream"
                )));
            }
        }
    }
    let (_, schema) = decoder.ok_or_else(|| ipc_error("stream has no schema"))?;
    match batches.len() {
        0 => Ok(None),
        1 => Ok(batches.pop()),
        _ => arrow::compute::concat_batches(&schema, &batches).map(Some),
    }
}

thread_local! {
    /// The last input schema message and its schema: every push of a run
    /// carries the same one.
    static INPUT_SCHEMA: std::cell::RefCell<Option<(Vec<u8>, SchemaRef)>> =
        const { std::cell::RefCell::new(None) };
}

/// The schema of a trusted schema message, parsed once per distinct message.
fn trusted_schema(meta: &[u8], message: fb::Message<'_>) -> Result<SchemaRef, ArrowError> {
    INPUT_SCHEMA.with_borrow_mut(|last| {
        if let Some((bytes, schema)) = last.as_ref()
            && bytes.as_slice() == meta
        {
            return Ok(schema.clone());
        }
        let header = message
            .header_as_schema()
            .ok_or_else(|| ipc_error("schema message without a schema"))?;
        let schema = Arc::new(schema_from_fb(header)?);
        *last = Some((meta.to_vec(), schema.clone()));
        Ok(schema)
    })
}

/// Encode a schema as an IPC stream without batches.
pub fn encode_schema(schema: &SchemaRef) -> Result<Vec<u8>, ArrowError> {
    let w = StreamWriter::try_new(Vec::new(), schema)?;
    w.into_inner()
}

/// Decode a schema written by [`encode_schema`].
pub fn decode_schema(bytes: &[u8]) -> Result<SchemaRef, ArrowError> {
    Ok(scan(bytes, |_| Ok(()))?.schema)
}

/// What an IPC stream holds, read from its metadata alone (no array is
/// built): enough for a receiver to refuse it before paying for decoding.
#[derive(Debug, Clone)]
pub struct StreamSummary {
    /// The stream's schema.
    pub schema: SchemaRef,
    /// Rows over all record batches.
    pub rows: u64,
    /// Bytes that Utf8View/BinaryView values point to outside their views,
    /// summed over every view of every batch and dictionary. Views may all
    /// point into one small buffer, so this can dwarf the encoded size; it is
    /// what validating and digesting those columns costs.
    pub view_bytes: u64,
}

/// Check a stream's framing, metadata and buffer ranges without decoding
/// any array. Empty bytes summarize to `None` ("no rows"). [`decode`] runs
/// the same checks, so a stream that passes here only fails there on
/// invalid array contents, never with a panic.
pub fn summarize(bytes: &[u8]) -> Result<Option<StreamSummary>, ArrowError> {
    if bytes.is_empty() {
        return Ok(None);
    }
    scan(bytes, |_| Ok(())).map(Some)
}

/// Decode one IPC stream into a single batch (several batches in one stream
/// are concatenated). Empty bytes, or a stream with a schema and no batch,
/// decode to `None`. Takes the bytes by value: arrays point into them
/// (zero-copy) wherever the buffers are aligned, which is what crossing the
/// sandbox boundary mostly costs otherwise.
///
/// Union, run-end encoded and list-view columns are refused: nothing in
/// idem produces or digests them.
pub fn decode(bytes: Vec<u8>) -> Result<Option<RecordBatch>, ArrowError> {
    if bytes.is_empty() {
        return Ok(None);
    }
    let data = Buffer::from_vec(bytes);
    let mut dictionaries: HashMap<i64, ArrayRef> = HashMap::new();
    let mut batches = Vec::new();
    let summary = scan(data.as_slice(), |item| match item {
        Item::Schema(schema) => refuse_unreadable(schema),
        Item::Dictionary {
            message,
            body,
            version,
            schema,
        } => read_dictionary(
            &slice(&data, body)?,
            message,
            schema,
            &mut dictionaries,
            &version,
        ),
        Item::Batch {
            message,
            body,
            version,
            schema,
        } => {
            batches.push(read_record_batch(
                &slice(&data, body)?,
                message,
                schema.clone(),
                &dictionaries,
                None,
                &version,
            )?);
            Ok(())
        }
    })?;
    match batches.len() {
        0 => Ok(None),
        1 => Ok(batches.pop()),
        _ => arrow::compute::concat_batches(&summary.schema, &batches).map(Some),
    }
}

fn ipc_error(what: impl Into<String>) -> ArrowError {
    ArrowError::IpcError(what.into())
}

/// `data[range]` as a shared buffer; the range was checked by [`scan`].
fn slice(data: &Buffer, range: Range<usize>) -> Result<Buffer, ArrowError> {
    if range.start > range.end || range.end > data.len() {
        return Err(ipc_error("message body out of range"));
    }
    Ok(data.slice_with_length(range.start, range.end - range.start))
}

/// Types arrow reads without a safety net we can check cheaply, and that
/// idem never needs: refuse them before any batch is built.
fn refuse_unreadable(schema: &Schema) -> Result<(), ArrowError> {
    fn walk(name: &str, dt: &DataType) -> Result<(), ArrowError> {
        match dt {
            DataType::Union(..)
            | DataType::RunEndEncoded(..)
            | DataType::ListView(_)
            | DataType::LargeListView(_) => Err(ipc_error(format!(
                "column `{name}` has type {dt}, which does not cross the idem boundary"
            ))),
            DataType::List(f)
            | DataType::LargeList(f)
            | DataType::FixedSizeList(f, _)
            | DataType::Map(f, _) => walk(name, f.data_type()),
            DataType::Struct(fields) => fields.iter().try_for_each(|f| walk(name, f.data_type())),
            DataType::Dictionary(_, v) => walk(name, v),
            _ => Ok(()),
        }
    }
    schema
        .fields()
        .iter()
        .try_for_each(|f| walk(f.name(), f.data_type()))
}

/// One checked message of a stream, handed to [`scan`]'s visitor.
enum Item<'m, 's> {
    Schema(&'s SchemaRef),
    Dictionary {
        message: fb::DictionaryBatch<'m>,
        body: Range<usize>,
        version: fb::MetadataVersion,
        schema: &'s Schema,
    },
    Batch {
        message: fb::RecordBatch<'m>,
        body: Range<usize>,
        version: fb::MetadataVersion,
        schema: &'s SchemaRef,
    },
}

/// Walk the messages of a stream, checking each against the invariants
/// arrow's reader assumes, and hand each to `visit` once checked.
fn scan<'m>(
    bytes: &'m [u8],
    mut visit: impl FnMut(Item<'m, '_>) -> Result<(), ArrowError>,
) -> Result<StreamSummary, ArrowError> {
    let mut pos = 0usize;
    let mut schema: Option<SchemaRef> = None;
    let (mut rows, mut view_bytes) = (0u64, 0u64);
    while let Some(Framed { message, body, .. }) = next_message(bytes, &mut pos)? {
        let version = message.version();
        if version.0 < fb::MetadataVersion::V4.0 || version.0 > fb::MetadataVersion::V5.0 {
            return Err(ipc_error(format!(
                "unsupported IPC metadata version {version:?}"
            )));
        }
        match message.header_type() {
            fb::MessageHeader::Schema => {
                if schema.is_some() {
                    return Err(ipc_error("a second schema in one stream"));
                }
                let header = message
                    .header_as_schema()
                    .ok_or_else(|| ipc_error("schema message without a schema"))?;
                let s = Arc::new(schema_from_fb(header)?);
                visit(Item::Schema(&s))?;
                schema = Some(s);
            }
            fb::MessageHeader::DictionaryBatch => {
                let s = schema
                    .as_ref()
                    .ok_or_else(|| ipc_error("dictionary before the schema"))?;
                let header = message
                    .header_as_dictionary_batch()
                    .ok_or_else(|| ipc_error("dictionary message without a dictionary"))?;
                if header.isDelta() {
                    return Err(ipc_error("delta dictionaries are not accepted"));
                }
                let data = header
                    .data()
                    .ok_or_else(|| ipc_error("dictionary message without data"))?;
                let field = Field::new("", dictionary_values(s, header.id())?, true);
                let mut check = BatchCheck::new(data, &bytes[body.clone()], version)?;
                check.array(&field, 0)?;
                view_bytes = view_bytes.saturating_add(check.finish()?);
                visit(Item::Dictionary {
                    message: header,
                    body,
                    version,
                    schema: s,
                })?;
            }
            fb::MessageHeader::RecordBatch => {
                let s = schema
                    .as_ref()
                    .ok_or_else(|| ipc_error("record batch before the schema"))?;
                let header = message
                    .header_as_record_batch()
                    .ok_or_else(|| ipc_error("record batch message without a batch"))?;
                let mut check = BatchCheck::new(header, &bytes[body.clone()], version)?;
                for f in s.fields() {
                    check.array(f, 0)?;
                }
                view_bytes = view_bytes.saturating_add(check.finish()?);
                rows = rows.saturating_add(header.length() as u64);
                visit(Item::Batch {
                    message: header,
                    body,
                    version,
                    schema: s,
                })?;
            }
            fb::MessageHeader::NONE => {}
            other => {
                return Err(ipc_error(format!(
                    "unexpected {other:?} message in a stream"
                )));
            }
        }
    }
    if pos != bytes.len() {
        return Err(ipc_error("bytes after the end-of-stream marker"));
    }
    let schema = schema.ok_or_else(|| ipc_error("stream has no schema"))?;
    Ok(StreamSummary {
        schema,
        rows,
        view_bytes,
    })
}

/// One message of a stream, framed: where it starts, its metadata (parsed
/// and verified) and the range of its body. Its contents are not checked.
struct Framed<'m> {
    start: usize,
    meta: &'m [u8],
    message: fb::Message<'m>,
    body: Range<usize>,
}

/// The message at `*pos`, moving past it; `None` at the end of the bytes or
/// at an end-of-stream marker (`*pos` then just past the marker).
fn next_message<'m>(bytes: &'m [u8], pos: &mut usize) -> Result<Option<Framed<'m>>, ArrowError> {
    if *pos >= bytes.len() {
        return Ok(None);
    }
    let start = *pos;
    let mut len = read_u32(bytes, pos)?;
    if len == u32::MAX {
        // Continuation marker, then the metadata length.
        len = read_u32(bytes, pos)?;
    }
    if len == 0 {
        return Ok(None);
    }
    let meta = take(bytes, pos, len as usize, "message metadata")?;
    let message = fb::root_as_message(meta)
        .map_err(|e| ipc_error(format!("invalid message metadata: {e}")))?;
    let body_len = usize::try_from(message.bodyLength())
        .map_err(|_| ipc_error("negative message body length"))?;
    let body_start = *pos;
    take(bytes, pos, body_len, "message body")?;
    Ok(Some(Framed {
        start,
        meta,
        message,
        body: body_start..*pos,
    }))
}

fn read_u32(bytes: &[u8], pos: &mut usize) -> Result<u32, ArrowError> {
    let b = take(bytes, pos, 4, "message length")?;
    let mut le = [0u8; 4];
    le.copy_from_slice(b);
    Ok(u32::from_le_bytes(le))
}

/// The next `n` bytes at `*pos`, or an error naming `what` was cut short.
fn take<'b>(
    bytes: &'b [u8],
    pos: &mut usize,
    n: usize,
    what: &str,
) -> Result<&'b [u8], ArrowError> {
    let end = pos
        .checked_add(n)
        .filter(|e| *e <= bytes.len())
        .ok_or_else(|| ipc_error(format!("stream ends inside the {what}")))?;
    let b = &bytes[*pos..end];
    *pos = end;
    Ok(b)
}

/// The value type of the dictionary `id`, as arrow's reader finds it.
fn dictionary_values(schema: &Schema, id: i64) -> Result<DataType, ArrowError> {
    #[allow(deprecated)] // arrow's reader still finds dictionaries by id
    let fields = schema.fields_with_dict_id(id);
    match fields.first().map(|f| f.data_type()) {
        Some(DataType::Dictionary(_, v)) => Ok(v.as_ref().clone()),
        _ => Err(ipc_error(format!(
            "dictionary id {id} is not in the schema"
        ))),
    }
}

/// A field node's length and null count, both checked to be in range.
#[derive(Clone, Copy)]
struct Node {
    len: usize,
    nulls: usize,
}

/// Walks one record batch's nodes and buffers exactly as arrow's reader
/// will consume them, checking every range it will slice.
struct BatchCheck<'b> {
    nodes: Vec<(i64, i64)>,
    next_node: usize,
    buffers: Vec<(i64, i64)>,
    next_buffer: usize,
    variadic: VecDeque<i64>,
    body: &'b [u8],
    version: fb::MetadataVersion,
    view_bytes: u64,
}

impl<'b> BatchCheck<'b> {
    fn new(
        batch: fb::RecordBatch<'_>,
        body: &'b [u8],
        version: fb::MetadataVersion,
    ) -> Result<Self, ArrowError> {
        if batch.compression().is_some() {
            // Guests never compress; a compressed body could also expand
            // far past every limit before anything is counted.
            return Err(ipc_error("compressed IPC bodies are not accepted"));
        }
        if !(0..=MAX_LEN).contains(&batch.length()) {
            return Err(ipc_error(format!(
                "record batch length {} out of range",
                batch.length()
            )));
        }
        let nodes = batch
            .nodes()
            .ok_or_else(|| ipc_error("record batch without field nodes"))?
            .iter()
            .map(|n| (n.length(), n.null_count()))
            .collect();
        let buffers = batch
            .buffers()
            .ok_or_else(|| ipc_error("record batch without buffers"))?
            .iter()
            .map(|b| (b.offset(), b.length()))
            .collect();
        let variadic = batch
            .variadicBufferCounts()
            .map(|v| v.iter().collect())
            .unwrap_or_default();
        Ok(BatchCheck {
            nodes,
            next_node: 0,
            buffers,
            next_buffer: 0,
            variadic,
            body,
            version,
            view_bytes: 0,
        })
    }

    fn node(&mut self, field: &Field) -> Result<Node, ArrowError> {
        let (len, nulls) = *self.nodes.get(self.next_node).ok_or_else(|| {
            ipc_error(format!("no field node left for column `{}`", field.name()))
        })?;
        self.next_node += 1;
        if !(0..=MAX_LEN).contains(&len) || !(0..=len).contains(&nulls) {
            return Err(ipc_error(format!(
                "column `{}`: length {len} / null count {nulls} out of range",
                field.name()
            )));
        }
        Ok(Node {
            len: len as usize,
            nulls: nulls as usize,
        })
    }

    /// The next buffer's range in the body. Its length must be a whole
    /// number of `width`-byte values: arrow's validation views typed
    /// buffers with an assertion that panics otherwise.
    fn buffer(&mut self, field: &Field, width: usize) -> Result<Range<usize>, ArrowError> {
        let (offset, len) = *self
            .buffers
            .get(self.next_buffer)
            .ok_or_else(|| ipc_error(format!("no buffer left for column `{}`", field.name())))?;
        self.next_buffer += 1;
        let start = usize::try_from(offset).ok();
        let end = start
            .zip(usize::try_from(len).ok())
            .and_then(|(s, l)| s.checked_add(l));
        match (start, end) {
            (Some(start), Some(end)) if end <= self.body.len() && (end - start) % width == 0 => {
                Ok(start..end)
            }
            _ => Err(ipc_error(format!(
                "column `{}`: buffer at {offset} of {len} bytes is outside the {}-byte body or not a whole number of {width}-byte values",
                field.name(),
                self.body.len()
            ))),
        }
    }

    /// A validity bitmap must cover the node when it claims nulls.
    fn validity(&self, field: &Field, node: Node, bits: &Range<usize>) -> Result<(), ArrowError> {
        if node.nulls > 0 && bits.len().saturating_mul(8) < node.len {
            return Err(ipc_error(format!(
                "column `{}`: validity bitmap shorter than its {} rows",
                field.name(),
                node.len
            )));
        }
        Ok(())
    }

    /// Mirror of arrow-ipc's `RecordBatchDecoder::create_array`.
    fn array(&mut self, field: &Field, depth: usize) -> Result<(), ArrowError> {
        if depth > MAX_DEPTH {
            return Err(ipc_error("schema nested too deeply"));
        }
        match field.data_type() {
            DataType::Utf8 | DataType::Binary => self.offsets_and_data(field, 4),
            DataType::LargeUtf8 | DataType::LargeBinary => self.offsets_and_data(field, 8),
            DataType::Utf8View | DataType::BinaryView => {
                let count = self
                    .variadic
                    .pop_front()
                    .and_then(|c| usize::try_from(c).ok())
                    .filter(|c| *c <= self.buffers.len().saturating_sub(self.next_buffer))
                    .ok_or_else(|| {
                        ipc_error(format!(
                            "column `{}`: missing or impossible variadic buffer count",
                            field.name()
                        ))
                    })?;
                let bits = self.buffer(field, 1)?;
                let views = self.buffer(field, VIEW_SIZE)?;
                for _ in 0..count {
                    self.buffer(field, 1)?;
                }
                let node = self.node(field)?;
                self.validity(field, node, &bits)?;
                self.views(field, node, views)
            }
            DataType::FixedSizeBinary(width) => {
                if *width < 0 {
                    return Err(ipc_error("negative FixedSizeBinary width"));
                }
                self.plain(field, 1)
            }
            DataType::List(child) | DataType::Map(child, _) => {
                self.offsets_and_child(field, child, &[4], depth)
            }
            DataType::LargeList(child) => self.offsets_and_child(field, child, &[8], depth),
            DataType::ListView(child) => self.offsets_and_child(field, child, &[4, 4], depth),
            DataType::LargeListView(child) => self.offsets_and_child(field, child, &[8, 8], depth),
            DataType::FixedSizeList(child, size) => {
                if *size < 0 {
                    return Err(ipc_error("negative FixedSizeList size"));
                }
                self.offsets_and_child(field, child, &[], depth)
            }
            DataType::Struct(children) => {
                let node = self.node(field)?;
                let bits = self.buffer(field, 1)?;
                self.validity(field, node, &bits)?;
                for child in children {
                    self.array(child, depth + 1)?;
                }
                Ok(())
            }
            DataType::RunEndEncoded(run_ends, values) => {
                self.node(field)?;
                self.array(run_ends, depth + 1)?;
                self.array(values, depth + 1)
            }
            DataType::Dictionary(key, _) => {
                #[allow(deprecated)] // arrow's reader still finds dictionaries by id
                let has_id = field.dict_id().is_some();
                if !has_id {
                    return Err(ipc_error(format!(
                        "dictionary column `{}` has no dictionary id",
                        field.name()
                    )));
                }
                self.plain(field, key.primitive_width().unwrap_or(1))
            }
            DataType::Union(children, mode) => {
                let node = self.node(field)?;
                if self.version.0 < fb::MetadataVersion::V5.0 {
                    self.buffer(field, 1)?;
                }
                let type_ids = self.buffer(field, 1)?;
                if type_ids.len() < node.len {
                    return Err(ipc_error("union type ids shorter than the column"));
                }
                if *mode == UnionMode::Dense {
                    let offsets = self.buffer(field, 4)?;
                    if offsets.len() / 4 < node.len {
                        return Err(ipc_error("union offsets shorter than the column"));
                    }
                }
                for (_, child) in children.iter() {
                    self.array(child, depth + 1)?;
                }
                Ok(())
            }
            DataType::Null => self.node(field).map(|_| ()),
            // Fixed-width types and booleans: validity and values.
            dt => self.plain(field, dt.primitive_width().unwrap_or(1)),
        }
    }

    /// A node with a validity bitmap and one values buffer of `width`-byte
    /// values.
    fn plain(&mut self, field: &Field, width: usize) -> Result<(), ArrowError> {
        let node = self.node(field)?;
        let bits = self.buffer(field, 1)?;
        self.buffer(field, width)?;
        self.validity(field, node, &bits)
    }

    /// Strings and binary: validity, offsets of `width` bytes, data.
    fn offsets_and_data(&mut self, field: &Field, width: usize) -> Result<(), ArrowError> {
        let node = self.node(field)?;
        let bits = self.buffer(field, 1)?;
        self.buffer(field, width)?;
        self.buffer(field, 1)?;
        self.validity(field, node, &bits)
    }

    /// Lists and maps: validity, offset buffers of the given widths, child.
    fn offsets_and_child(
        &mut self,
        field: &Field,
        child: &Field,
        widths: &[usize],
        depth: usize,
    ) -> Result<(), ArrowError> {
        let node = self.node(field)?;
        let bits = self.buffer(field, 1)?;
        for w in widths {
            self.buffer(field, *w)?;
        }
        self.validity(field, node, &bits)?;
        self.array(child, depth + 1)
    }

    /// Sum what the views point at; arrow validates the views themselves.
    fn views(&mut self, field: &Field, node: Node, views: Range<usize>) -> Result<(), ArrowError> {
        let body = self.body;
        let raw = &body[views];
        if raw.len() / VIEW_SIZE < node.len {
            return Err(ipc_error(format!(
                "column `{}`: views buffer shorter than its {} rows",
                field.name(),
                node.len
            )));
        }
        for view in raw.chunks_exact(VIEW_SIZE).take(node.len) {
            let len = u32::from_le_bytes([view[0], view[1], view[2], view[3]]);
            if len > MAX_INLINE_VIEW {
                self.view_bytes = self.view_bytes.saturating_add(u64::from(len));
            }
        }
        Ok(())
    }

    /// The view bytes seen; arrow's reader asserts every variadic count
    /// was used, so that is checked too.
    fn finish(self) -> Result<u64, ArrowError> {
        if self.variadic.is_empty() {
            Ok(self.view_bytes)
        } else {
            Err(ipc_error("unused variadic buffer counts"))
        }
    }
}

/// A schema from its flatbuffer, refusing (instead of panicking on, as
/// arrow's `fb_to_schema` does) every malformed type.
fn schema_from_fb(s: fb::Schema<'_>) -> Result<Schema, ArrowError> {
    if s.endianness() != fb::Endianness::Little {
        return Err(ipc_error("big-endian IPC streams are not accepted"));
    }
    let fields = s
        .fields()
        .ok_or_else(|| ipc_error("schema without fields"))?
        .iter()
        .map(|f| field_from_fb(f, 0))
        .collect::<Result<Vec<_>, _>>()?;
    let mut metadata = HashMap::new();
    for kv in s.custom_metadata().into_iter().flatten() {
        if let (Some(k), Some(v)) = (kv.key(), kv.value()) {
            metadata.insert(k.to_string(), v.to_string());
        }
    }
    Ok(Schema::new_with_metadata(fields, metadata))
}

fn field_from_fb(f: fb::Field<'_>, depth: usize) -> Result<Field, ArrowError> {
    if depth > MAX_DEPTH {
        return Err(ipc_error("schema nested too deeply"));
    }
    let name = f.name().unwrap_or_default();
    let value_type = type_from_fb(f, depth)?;
    let field = match f.dictionary() {
        Some(d) => {
            let index = d
                .indexType()
                .ok_or_else(|| ipc_error(format!("dictionary `{name}` without an index type")))?;
            let key = int_type(index.bitWidth(), index.is_signed())?;
            let dt = DataType::Dictionary(Box::new(key), Box::new(value_type));
            #[allow(deprecated)] // arrow's reader still finds dictionaries by id
            let field = Field::new_dict(name, dt, f.nullable(), d.id(), d.isOrdered());
            field
        }
        None => Field::new(name, value_type, f.nullable()),
    };
    let mut metadata = HashMap::new();
    for kv in f.custom_metadata().into_iter().flatten() {
        if let (Some(k), Some(v)) = (kv.key(), kv.value()) {
            metadata.insert(k.to_string(), v.to_string());
        }
    }
    Ok(field.with_metadata(metadata))
}

fn int_type(bits: i32, signed: bool) -> Result<DataType, ArrowError> {
    Ok(match (bits, signed) {
        (8, true) => DataType::Int8,
        (8, false) => DataType::UInt8,
        (16, true) => DataType::Int16,
        (16, false) => DataType::UInt16,
        (32, true) => DataType::Int32,
        (32, false) => DataType::UInt32,
        (64, true) => DataType::Int64,
        (64, false) => DataType::UInt64,
        _ => return Err(ipc_error(format!("no {bits}-bit integer type"))),
    })
}

fn time_unit(u: fb::TimeUnit) -> Result<TimeUnit, ArrowError> {
    Ok(match u {
        fb::TimeUnit::SECOND => TimeUnit::Second,
        fb::TimeUnit::MILLISECOND => TimeUnit::Millisecond,
        fb::TimeUnit::MICROSECOND => TimeUnit::Microsecond,
        fb::TimeUnit::NANOSECOND => TimeUnit::Nanosecond,
        u => return Err(ipc_error(format!("unknown time unit {u:?}"))),
    })
}

/// The children of `f`, which must number `n` when given.
fn children_of(f: fb::Field<'_>, n: Option<usize>, depth: usize) -> Result<Vec<Field>, ArrowError> {
    let children: Vec<Field> = f
        .children()
        .into_iter()
        .flatten()
        .map(|c| field_from_fb(c, depth + 1))
        .collect::<Result<_, _>>()?;
    match n {
        Some(n) if children.len() != n => Err(ipc_error(format!(
            "field `{}` of type {:?} has {} children, not {n}",
            f.name().unwrap_or_default(),
            f.type_type(),
            children.len()
        ))),
        _ => Ok(children),
    }
}

fn one_child(f: fb::Field<'_>, depth: usize) -> Result<Arc<Field>, ArrowError> {
    let mut children = children_of(f, Some(1), depth)?;
    children
        .pop()
        .map(Arc::new)
        .ok_or_else(|| ipc_error("missing child field"))
}

fn type_from_fb(f: fb::Field<'_>, depth: usize) -> Result<DataType, ArrowError> {
    let bad = || {
        ipc_error(format!(
            "field `{}` has a malformed {:?} type",
            f.name().unwrap_or_default(),
            f.type_type()
        ))
    };
    Ok(match f.type_type() {
        fb::Type::Null => DataType::Null,
        fb::Type::Bool => DataType::Boolean,
        fb::Type::Int => {
            let i = f.type_as_int().ok_or_else(bad)?;
            int_type(i.bitWidth(), i.is_signed())?
        }
        fb::Type::Binary => DataType::Binary,
        fb::Type::BinaryView => DataType::BinaryView,
        fb::Type::LargeBinary => DataType::LargeBinary,
        fb::Type::Utf8 => DataType::Utf8,
        fb::Type::Utf8View => DataType::Utf8View,
        fb::Type::LargeUtf8 => DataType::LargeUtf8,
        fb::Type::FixedSizeBinary => {
            let w = f.type_as_fixed_size_binary().ok_or_else(bad)?.byteWidth();
            if w < 0 {
                return Err(bad());
            }
            DataType::FixedSizeBinary(w)
        }
        fb::Type::FloatingPoint => match f.type_as_floating_point().ok_or_else(bad)?.precision() {
            fb::Precision::HALF => DataType::Float16,
            fb::Precision::SINGLE => DataType::Float32,
            fb::Precision::DOUBLE => DataType::Float64,
            _ => return Err(bad()),
        },
        fb::Type::Date => match f.type_as_date().ok_or_else(bad)?.unit() {
            fb::DateUnit::DAY => DataType::Date32,
            fb::DateUnit::MILLISECOND => DataType::Date64,
            _ => return Err(bad()),
        },
        fb::Type::Time => {
            let t = f.type_as_time().ok_or_else(bad)?;
            match (t.bitWidth(), time_unit(t.unit())?) {
                (32, u @ (TimeUnit::Second | TimeUnit::Millisecond)) => DataType::Time32(u),
                (64, u @ (TimeUnit::Microsecond | TimeUnit::Nanosecond)) => DataType::Time64(u),
                _ => return Err(bad()),
            }
        }
        fb::Type::Timestamp => {
            let t = f.type_as_timestamp().ok_or_else(bad)?;
            DataType::Timestamp(time_unit(t.unit())?, t.timezone().map(Into::into))
        }
        fb::Type::Interval => match f.type_as_interval().ok_or_else(bad)?.unit() {
            fb::IntervalUnit::YEAR_MONTH => DataType::Interval(IntervalUnit::YearMonth),
            fb::IntervalUnit::DAY_TIME => DataType::Interval(IntervalUnit::DayTime),
            fb::IntervalUnit::MONTH_DAY_NANO => DataType::Interval(IntervalUnit::MonthDayNano),
            _ => return Err(bad()),
        },
        fb::Type::Duration => {
            DataType::Duration(time_unit(f.type_as_duration().ok_or_else(bad)?.unit())?)
        }
        fb::Type::List => DataType::List(one_child(f, depth)?),
        fb::Type::LargeList => DataType::LargeList(one_child(f, depth)?),
        fb::Type::ListView => DataType::ListView(one_child(f, depth)?),
        fb::Type::LargeListView => DataType::LargeListView(one_child(f, depth)?),
        fb::Type::FixedSizeList => {
            let size = f.type_as_fixed_size_list().ok_or_else(bad)?.listSize();
            if size < 0 {
                return Err(bad());
            }
            DataType::FixedSizeList(one_child(f, depth)?, size)
        }
        fb::Type::Struct_ => DataType::Struct(children_of(f, None, depth)?.into()),
        fb::Type::RunEndEncoded => {
            let mut c = children_of(f, Some(2), depth)?.into_iter().map(Arc::new);
            match (c.next(), c.next()) {
                (Some(run_ends), Some(values)) => DataType::RunEndEncoded(run_ends, values),
                _ => return Err(bad()),
            }
        }
        fb::Type::Map => {
            let sorted = f.type_as_map().ok_or_else(bad)?.keysSorted();
            DataType::Map(one_child(f, depth)?, sorted)
        }
        fb::Type::Decimal => {
            let d = f.type_as_decimal().ok_or_else(bad)?;
            let precision = u8::try_from(d.precision()).map_err(|_| bad())?;
            let scale = i8::try_from(d.scale()).map_err(|_| bad())?;
            match d.bitWidth() {
                32 => DataType::Decimal32(precision, scale),
                64 => DataType::Decimal64(precision, scale),
                128 => DataType::Decimal128(precision, scale),
                256 => DataType::Decimal256(precision, scale),
                _ => return Err(bad()),
            }
        }
        fb::Type::Union => {
            let u = f.type_as_union().ok_or_else(bad)?;
            let mode = match u.mode() {
                fb::UnionMode::Dense => UnionMode::Dense,
                fb::UnionMode::Sparse => UnionMode::Sparse,
                _ => return Err(bad()),
            };
            let children = children_of(f, None, depth)?;
            let ids: Vec<i8> = match u.typeIds() {
                Some(ids) => ids
                    .iter()
                    .map(|i| i8::try_from(i).map_err(|_| bad()))
                    .collect::<Result<_, _>>()?,
                None => (0..children.len())
                    .map(|i| i8::try_from(i).map_err(|_| bad()))
                    .collect::<Result<_, _>>()?,
            };
            DataType::Union(UnionFields::try_new(ids, children)?, mode)
        }
        _ => return Err(bad()),
    })
}

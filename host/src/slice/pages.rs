//! The pages of a column chunk, read from their headers before anything is
//! decompressed or decoded: how many bytes each page declares it holds
//! once decompressed, how many values and rows, and whether its codec
//! really stops there.
//!
//! The Parquet decoder sizes its buffers from these headers and trusts
//! them; for GZIP, BROTLI and LZ4 it even decompresses to the end of the
//! stream and compares afterwards, so a 4 KB page that inflates to
//! gigabytes is held whole before it is refused. The headers are not
//! public in the `parquet` crate, so the few fields needed are read here
//! from the Thrift compact encoding, with every length checked against the
//! chunk before it is used.

use std::io::Read;

use parquet::basic::Compression;
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::reader::ChunkReader;

/// Nesting deeper than this in a page header is refused (statistics are
/// two levels deep; nothing legitimate comes near it).
const MAX_DEPTH: u32 = 16;

/// Thrift `PageType` values.
const DATA_PAGE: i32 = 0;
const DICTIONARY_PAGE: i32 = 2;
const DATA_PAGE_V2: i32 = 3;
/// Thrift `Encoding` values.
const PLAIN_DICTIONARY: i32 = 2;
const DELTA_BYTE_ARRAY: i32 = 7;
const RLE_DICTIONARY: i32 = 8;

/// One page as its header describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct PageInfo {
    /// Thrift page type (0 data, 2 dictionary, 3 data v2).
    pub kind: i32,
    /// Bytes once decompressed, as declared.
    pub uncompressed: u64,
    /// Bytes stored after the header.
    pub compressed: u64,
    /// Values (levels) in the page, or entries of a dictionary page.
    pub values: u64,
    /// Rows, for a v2 page (a v1 page does not say).
    pub rows: Option<u64>,
    /// The values' encoding (Thrift `Encoding`).
    pub encoding: i32,
    /// Where the page's stored bytes start in the file.
    pub data_at: u64,
    /// Leading bytes of a v2 page stored uncompressed (its levels).
    pub levels: u64,
    /// Whether the stored bytes are compressed (v2 pages may say no).
    pub compressed_data: bool,
}

impl PageInfo {
    /// A dictionary page.
    pub fn is_dictionary(&self) -> bool {
        self.kind == DICTIONARY_PAGE
    }

    /// A data page (v1 or v2) whose values index a dictionary page.
    pub fn indexes_dictionary(&self) -> bool {
        (self.kind == DATA_PAGE || self.kind == DATA_PAGE_V2)
            && (self.encoding == RLE_DICTIONARY || self.encoding == PLAIN_DICTIONARY)
    }

    /// A data page whose strings may be longer than the page itself
    /// (each value a prefix of the one before plus a suffix).
    pub fn shares_prefixes(&self) -> bool {
        self.encoding == DELTA_BYTE_ARRAY
    }
}

/// The byte range a column chunk's pages occupy, checked against the file:
/// the decoder asserts (panics) on a negative offset, and a dictionary
/// "at offset 0" (a known writer bug) would be read from the file's magic.
pub(super) fn chunk_range(
    chunk: &ColumnChunkMetaData,
    file_len: u64,
) -> Result<(u64, u64), String> {
    let start = match chunk.dictionary_page_offset() {
        Some(0) => {
            return Err(
                "its dictionary page offset is 0, inside the file's leading magic (a bug of the writer that made it, e.g. Dremio 3.2): rewrite the file with a current writer"
                    .into(),
            );
        }
        Some(at) => at,
        None => chunk.data_page_offset(),
    };
    let len = chunk.compressed_size();
    let (Ok(start), Ok(len)) = (u64::try_from(start), u64::try_from(len)) else {
        return Err(format!("its pages are at offset {start}, length {len}"));
    };
    match start.checked_add(len) {
        Some(end) if start >= 4 && end <= file_len => Ok((start, len)),
        _ => Err(format!(
            "its pages (offset {start}, {len} bytes) do not fit in the file of {file_len} bytes"
        )),
    }
}

/// Every page header of `chunk`, in order, stopping at the end of its range.
pub(super) fn walk<R: ChunkReader>(
    file: &R,
    chunk: &ColumnChunkMetaData,
) -> Result<Vec<PageInfo>, String> {
    let (start, len) = chunk_range(chunk, file.len())?;
    let end = start + len;
    let mut pages = Vec::new();
    let mut at = start;
    while at < end {
        let input = file.get_read(at).map_err(|e| e.to_string())?;
        let mut header = Header {
            input: input.take(end - at),
            read: 0,
        };
        let page = header
            .page()
            .map_err(|e| format!("page header at byte {at}: {e}"))?;
        let data_at = at + header.read;
        let page_end = data_at
            .checked_add(page.compressed)
            .filter(|e| *e <= end)
            .ok_or_else(|| {
                format!(
                    "the page at byte {at} declares {} stored bytes, past the end of its column chunk",
                    page.compressed
                )
            })?;
        pages.push(PageInfo { data_at, ..page });
        at = page_end;
    }
    Ok(pages)
}

/// Whether `codec` may write past the size a page declares before the
/// decoder compares: these are decompressed here first, bounded.
pub(super) fn unbounded(codec: Compression) -> bool {
    matches!(
        codec,
        Compression::GZIP(_) | Compression::BROTLI(_) | Compression::LZ4
    )
}

/// How many bytes `page`'s stored data inflates to, counted (and thrown
/// away) up to one byte past what its header declares: `Ok(n)` with `n >
/// declared` is a page that lies about its size. A stream the codec cannot
/// read is left to the decoder to report (`Ok(0)`).
pub(super) fn inflated<R: ChunkReader>(
    file: &R,
    page: &PageInfo,
    codec: Compression,
) -> Result<u64, String> {
    if !page.compressed_data || page.compressed <= page.levels {
        return Ok(0);
    }
    let declared = page.uncompressed.saturating_sub(page.levels);
    let stored = file
        .get_bytes(
            page.data_at + page.levels,
            (page.compressed - page.levels) as usize,
        )
        .map_err(|e| e.to_string())?;
    let limit = declared.saturating_add(1);
    let counted = match codec {
        Compression::GZIP(_) => count(flate2::read::MultiGzDecoder::new(&stored[..]), limit),
        Compression::BROTLI(_) => count(brotli::Decompressor::new(&stored[..], 4096), limit),
        Compression::LZ4 => count(lz4_flex::frame::FrameDecoder::new(&stored[..]), limit),
        _ => Ok(0),
    };
    Ok(counted.unwrap_or(0))
}

/// Bytes `r` yields, reading at most `limit`.
fn count(r: impl Read, limit: u64) -> std::io::Result<u64> {
    std::io::copy(&mut r.take(limit), &mut std::io::sink())
}

/// A page header being read, counting its bytes.
struct Header<R> {
    input: R,
    read: u64,
}

impl<R: Read> Header<R> {
    fn byte(&mut self) -> Result<u8, String> {
        let mut b = [0u8];
        self.input
            .read_exact(&mut b)
            .map_err(|_| "it ends early".to_string())?;
        self.read += 1;
        Ok(b[0])
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("a varint longer than 10 bytes".into())
    }

    fn int(&mut self) -> Result<i64, String> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// An i32 field that must be a size or count (not negative).
    fn count(&mut self, what: &str) -> Result<u64, String> {
        let v = self.int()?;
        u64::try_from(v)
            .ok()
            .filter(|v| *v <= i32::MAX as u64)
            .ok_or_else(|| format!("{what} is {v}"))
    }

    fn skip_bytes(&mut self, n: u64) -> Result<(), String> {
        let got = std::io::copy(&mut (&mut self.input).take(n), &mut std::io::sink())
            .map_err(|e| e.to_string())?;
        if got != n {
            return Err("it ends early".into());
        }
        self.read += n;
        Ok(())
    }

    /// The next field's (id, type), `None` at the struct's end.
    fn field(&mut self, last: i16) -> Result<Option<(i16, u8)>, String> {
        let b = self.byte()?;
        if b == 0 {
            return Ok(None);
        }
        let delta = (b >> 4) as i16;
        let id = if delta == 0 {
            i16::try_from(self.int()?).map_err(|_| "a field id out of range".to_string())?
        } else {
            last.wrapping_add(delta)
        };
        Ok(Some((id, b & 0x0f)))
    }

    /// Skip one value of compact type `t`.
    fn skip(&mut self, t: u8, depth: u32) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err("nested too deeply".into());
        }
        match t {
            1 | 2 => Ok(()),
            3 => self.byte().map(drop),
            4..=6 => self.varint().map(drop),
            7 => self.skip_bytes(8),
            8 => {
                let n = self.varint()?;
                self.skip_bytes(n)
            }
            9 | 10 => {
                let h = self.byte()?;
                let n = match h >> 4 {
                    15 => self.varint()?,
                    n => u64::from(n),
                };
                let elem = h & 0x0f;
                for _ in 0..n {
                    // Booleans in a list take a byte each.
                    if elem == 1 || elem == 2 {
                        self.byte()?;
                    } else {
                        self.skip(elem, depth + 1)?;
                    }
                }
                Ok(())
            }
            11 => {
                let n = self.varint()?;
                if n == 0 {
                    return Ok(());
                }
                let kv = self.byte()?;
                for _ in 0..n {
                    self.skip(kv >> 4, depth + 1)?;
                    self.skip(kv & 0x0f, depth + 1)?;
                }
                Ok(())
            }
            12 => self.skip_struct(depth + 1),
            _ => Err(format!("unknown Thrift type {t}")),
        }
    }

    fn skip_struct(&mut self, depth: u32) -> Result<(), String> {
        let mut last = 0;
        while let Some((id, t)) = self.field(last)? {
            self.skip(t, depth)?;
            last = id;
        }
        Ok(())
    }

    /// A `PageHeader`: the fields sizes are taken from, others skipped.
    fn page(&mut self) -> Result<PageInfo, String> {
        let mut p = PageInfo {
            kind: -1,
            compressed_data: true,
            ..PageInfo::default()
        };
        let (mut sizes, mut last) = (0, 0);
        while let Some((id, t)) = self.field(last)? {
            match (id, t) {
                (1, 5) => p.kind = i32::try_from(self.int()?).unwrap_or(-1),
                (2, 5) => {
                    p.uncompressed = self.count("its uncompressed size")?;
                    sizes |= 1;
                }
                (3, 5) => {
                    p.compressed = self.count("its compressed size")?;
                    sizes |= 2;
                }
                (5 | 7 | 8, 12) => self.page_kind(id, &mut p)?,
                _ => self.skip(t, 1)?,
            }
            last = id;
        }
        if sizes != 3 {
            return Err("it has no page sizes".into());
        }
        if p.levels > p.uncompressed || p.levels > p.compressed {
            return Err(format!(
                "its levels take {} bytes, more than the page's {}",
                p.levels, p.uncompressed
            ));
        }
        Ok(p)
    }

    /// The data (5), dictionary (7) or data v2 (8) part of a page header.
    fn page_kind(&mut self, part: i16, p: &mut PageInfo) -> Result<(), String> {
        let mut last = 0;
        while let Some((id, t)) = self.field(last)? {
            match (part, id, t) {
                (_, 1, 5) => p.values = self.count("its value count")?,
                (5 | 7, 2, 5) | (8, 4, 5) => {
                    p.encoding = i32::try_from(self.int()?).unwrap_or(-1);
                }
                (8, 3, 5) => p.rows = Some(self.count("its row count")?),
                (8, 5 | 6, 5) => {
                    let n = self.count("its level length")?;
                    p.levels = p.levels.saturating_add(n);
                }
                (8, 7, 1 | 2) => p.compressed_data = t == 1,
                _ => self.skip(t, 2)?,
            }
            last = id;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    /// The compact encoding of one i32 field.
    fn i32_field(out: &mut Vec<u8>, delta: u8, v: i32) {
        out.push(delta << 4 | 5);
        let mut z = ((v << 1) ^ (v >> 31)) as u32 as u64;
        loop {
            let b = (z & 0x7f) as u8;
            z >>= 7;
            if z == 0 {
                out.push(b);
                break;
            }
            out.push(b | 0x80);
        }
    }

    /// A v1 data page header: `values` values of `encoding`, the sizes given.
    fn v1_header(uncompressed: i32, compressed: i32, values: i32, encoding: i32) -> Vec<u8> {
        let mut h = Vec::new();
        i32_field(&mut h, 1, DATA_PAGE);
        i32_field(&mut h, 1, uncompressed);
        i32_field(&mut h, 1, compressed);
        // Field 5 (data_page_header), a struct, two ids on from 3.
        h.push(2 << 4 | 12);
        i32_field(&mut h, 1, values);
        i32_field(&mut h, 1, encoding);
        // A binary field (statistics-like) to skip: id 3, length 3.
        h.extend([1 << 4 | 8, 3, b'a', b'b', b'c']);
        h.push(0);
        h.push(0);
        h
    }

    #[test]
    fn a_page_header_gives_its_sizes_values_and_encoding() {
        let mut h = Header {
            input: &v1_header(1_000, 400, 77, 8)[..],
            read: 0,
        };
        let p = h.page().unwrap();
        assert_eq!(
            (p.kind, p.uncompressed, p.compressed, p.values, p.encoding),
            (0, 1_000, 400, 77, 8)
        );
        assert!(p.indexes_dictionary());
    }

    #[test]
    fn truncated_negative_and_endless_headers_are_refused_not_trusted() {
        let h = v1_header(1_000, 400, 77, 0);
        for cut in 0..h.len() - 1 {
            let mut r = Header {
                input: &h[..cut],
                read: 0,
            };
            assert!(r.page().is_err(), "cut at {cut} was read");
        }
        let mut neg = Header {
            input: &v1_header(-5, 400, 1, 0)[..],
            read: 0,
        };
        assert!(neg.page().unwrap_err().contains("uncompressed size is -5"));
        // A list claiming 2^60 elements of structs nested without end.
        let mut deep = vec![1u8 << 4 | 12; 64];
        deep.push(0);
        let mut r = Header {
            input: &deep[..],
            read: 0,
        };
        assert!(r.page().unwrap_err().contains("nested too deeply"));
    }

    /// A brotli page whose header declares 100 bytes but that inflates to
    /// 64 MiB is counted only to 101 bytes.
    #[test]
    fn a_page_inflating_past_its_header_is_caught_after_one_byte_more() {
        let mut packed = Vec::new();
        {
            let mut w = brotli::CompressorWriter::new(&mut packed, 4096, 5, 22);
            let zeros = vec![0u8; 1 << 20];
            for _ in 0..64 {
                std::io::Write::write_all(&mut w, &zeros).unwrap();
            }
        }
        let page = PageInfo {
            kind: DATA_PAGE,
            uncompressed: 100,
            compressed: packed.len() as u64,
            data_at: 0,
            compressed_data: true,
            ..PageInfo::default()
        };
        let file = Bytes::from(packed);
        let n = inflated(&file, &page, Compression::BROTLI(Default::default())).unwrap();
        assert_eq!(n, 101);
    }
}

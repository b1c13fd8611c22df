//! Rows sent by `COPY … FROM STDIN (FORMAT binary)`: the fastest way into PostgreSQL (no SQL
//! text to parse, no array parameters to unpack, rows go into the table in batches). Rows are
//! encoded into a buffer that is sent a piece at a time, so the server takes in one piece
//! while the next is encoded and a batch of any size costs one piece of memory.

use sqlx::PgConnection;
use sqlx::postgres::PgCopyIn;

use crate::Result;

/// Bytes of COPY data sent at a time.
const PIECE: usize = 1 << 20;

/// A COPY in progress on one connection; [`Copy::finish`] ends it. Dropped unfinished (an
/// error while encoding or sending), the COPY is aborted but the server's answer is left
/// unread: the connection is fit only to be closed, which `in_transaction` does on any error.
pub(crate) struct Copy<'c> {
    copy: PgCopyIn<&'c mut PgConnection>,
    buf: Vec<u8>,
}

impl<'c> Copy<'c> {
    /// Starts `statement` (a `COPY … FROM STDIN (FORMAT binary)`) on `conn`.
    pub(crate) async fn start(conn: &'c mut PgConnection, statement: &str) -> Result<Copy<'c>> {
        let copy = conn.copy_in_raw(statement).await?;
        let mut buf = Vec::with_capacity(PIECE + 1024);
        // Signature, flags, header extension length.
        buf.extend_from_slice(b"PGCOPY\n\xff\r\n\0");
        buf.extend_from_slice(&[0; 8]);
        Ok(Copy { copy, buf })
    }

    /// Starts a row of `fields` fields: exactly that many values must follow.
    pub(crate) fn row(&mut self, fields: i16) {
        self.buf.extend_from_slice(&fields.to_be_bytes());
    }

    /// An `int8` field, or NULL.
    pub(crate) fn int(&mut self, v: Option<i64>) {
        match v {
            Some(v) => self.field(&v.to_be_bytes()),
            None => self.null(),
        }
    }

    /// An `int4` field, or NULL.
    pub(crate) fn int4(&mut self, v: Option<i32>) {
        match v {
            Some(v) => self.field(&v.to_be_bytes()),
            None => self.null(),
        }
    }

    /// An `int2` field.
    pub(crate) fn int2(&mut self, v: i16) {
        self.field(&v.to_be_bytes());
    }

    /// A `float8` field.
    pub(crate) fn float(&mut self, v: f64) {
        self.field(&v.to_be_bytes());
    }

    /// A `text` field, or NULL.
    pub(crate) fn text(&mut self, v: Option<&str>) {
        match v {
            Some(v) => self.field(v.as_bytes()),
            None => self.null(),
        }
    }

    fn field(&mut self, bytes: &[u8]) {
        // Every value written here is far shorter than 2 GiB (the field length's limit); were
        // one not, the length would not match the bytes and the server would refuse the COPY.
        self.buf.extend_from_slice(&i32::try_from(bytes.len()).unwrap_or(i32::MAX).to_be_bytes());
        self.buf.extend_from_slice(bytes);
    }

    fn null(&mut self) {
        self.buf.extend_from_slice(&(-1i32).to_be_bytes());
    }

    /// Sends the buffer once a piece is full; called after each row.
    pub(crate) async fn flush_full(&mut self) -> Result<()> {
        if self.buf.len() >= PIECE {
            let piece = std::mem::replace(&mut self.buf, Vec::with_capacity(PIECE + 1024));
            self.copy.send(piece).await?;
        }
        Ok(())
    }

    /// Sends the trailer and ends the COPY; returns the rows the server took in.
    pub(crate) async fn finish(mut self) -> Result<u64> {
        self.buf.extend_from_slice(&(-1i16).to_be_bytes());
        self.copy.send(self.buf).await?;
        Ok(self.copy.finish().await?)
    }
}

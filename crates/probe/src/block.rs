//! The block-page scan of an `http`/`https` answer (the check's `block_pattern`): a censor's
//! or a provider's page that answers with the expected status in place of the service. The
//! body is taken as it arrives, freed of its framing (a `Content-Length`, chunks, or up to the
//! close), and searched for the pattern as plain bytes (case and all), across reads and across
//! chunks, in the first [`BODY_LIMIT`] bytes at most. Nothing of the body is kept but its last
//! `pattern − 1` bytes, so a scan costs the same whatever the page.

/// Body bytes read at most, as they come on the wire (chunk framing included): a block page
/// says what it is near its top, and the bound keeps a large page from costing more than that.
pub(crate) const BODY_LIMIT: usize = 64 * 1024;

/// How the body of an answer ends (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// No body: the answer to a `HEAD`, a 1xx, a 204 or a 304.
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding` with `chunked` last.
    Chunked,
    /// Up to the close: no length, an unreadable one, or a transfer coding other than
    /// `chunked` last.
    UntilClose,
}

impl Framing {
    /// The framing of an answer of `status` with `headers`, to a `HEAD` request or not.
    pub(crate) fn of(status: u16, headers: &[httparse::Header<'_>], head: bool) -> Framing {
        if head || status < 200 || status == 204 || status == 304 {
            return Framing::Empty;
        }
        let (mut coding, mut length) = (None, None);
        for h in headers {
            if h.name.eq_ignore_ascii_case("transfer-encoding") {
                // Several such headers make one list: the last one holds its last coding.
                coding = Some(h.value);
            } else if h.name.eq_ignore_ascii_case("content-length") && length.is_none() {
                length = std::str::from_utf8(h.value).ok().and_then(|v| v.trim().parse::<u64>().ok());
            }
        }
        // A transfer coding overrides any length.
        match (coding, length) {
            (Some(list), _) => {
                let last = list.rsplit(|b| *b == b',').next().unwrap_or_default().trim_ascii();
                if last.eq_ignore_ascii_case(b"chunked") { Framing::Chunked } else { Framing::UntilClose }
            }
            (None, Some(n)) => Framing::Length(n),
            (None, None) => Framing::UntilClose,
        }
    }
}

/// Where a scan stands after the bytes fed so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scanned {
    /// Not found yet, and more body may follow.
    More,
    /// The body contains the pattern.
    Found,
    /// The body ended, or the bound was reached, without the pattern.
    Clean,
}

/// A scan of one body for one pattern, fed with the bytes as they are read.
#[derive(Debug)]
pub(crate) struct Scan<'p> {
    pattern: &'p [u8],
    body: Body,
    /// The last `pattern − 1` body bytes at most: where a pattern split by a read (or a chunk)
    /// begins.
    carry: Vec<u8>,
    /// Bytes fed so far, at most [`BODY_LIMIT`].
    read: usize,
}

impl<'p> Scan<'p> {
    /// A scan for `pattern` (an empty one is in every body) of a body framed so.
    pub(crate) fn new(pattern: &'p [u8], framing: Framing) -> Self {
        let body = match framing {
            Framing::Empty | Framing::Length(0) => Body::Done,
            Framing::Length(n) => Body::Length(n),
            Framing::Chunked => Body::ChunkSize { size: 0, digits: false, ext: false },
            Framing::UntilClose => Body::UntilClose,
        };
        Scan { pattern, body, carry: Vec::with_capacity(2 * pattern.len()), read: 0 }
    }

    /// Feeds the next bytes read after the head (the first call: those read with the head).
    /// Bytes past the end of the body or past the bound are not looked at.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Scanned {
        let take = bytes.len().min(BODY_LIMIT - self.read);
        self.read += take;
        let mut rest = &bytes[..take];
        while !rest.is_empty() && self.body != Body::Done {
            let (data, used) = self.body.next(rest);
            rest = &rest[used..];
            if self.search(data) {
                return Scanned::Found;
            }
        }
        if self.body == Body::Done || self.read >= BODY_LIMIT { Scanned::Clean } else { Scanned::More }
    }

    /// Looks for the pattern in the next body bytes, and in the seam between them and the
    /// bytes before.
    fn search(&mut self, data: &[u8]) -> bool {
        if data.is_empty() {
            return false;
        }
        let keep = self.pattern.len().saturating_sub(1);
        if !self.carry.is_empty() {
            let seam = data.len().min(keep);
            self.carry.extend_from_slice(&data[..seam]);
            if contains(&self.carry, self.pattern) {
                return true;
            }
            if seam == data.len() {
                // Every new byte is in the carry now; keep its end only.
                let excess = self.carry.len().saturating_sub(keep);
                self.carry.drain(..excess);
                return false;
            }
        }
        if contains(data, self.pattern) {
            return true;
        }
        self.carry.clear();
        self.carry.extend_from_slice(&data[data.len().saturating_sub(keep)..]);
        false
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

/// Where the reader is in the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    /// Past the end: nothing more is body.
    Done,
    /// This many bytes of a `Content-Length` body left.
    Length(u64),
    UntilClose,
    /// In a chunk-size line: the size so far, whether it has a digit, whether the line is in
    /// its extensions (or trailing blanks) now.
    ChunkSize {
        size: u64,
        digits: bool,
        ext: bool,
    },
    /// This many bytes of a chunk's data left.
    ChunkData(u64),
    /// After a chunk's data, at its CRLF.
    ChunkEnd,
}

impl Body {
    /// The body bytes at the start of `bytes` (possibly none) and how many of `bytes` were
    /// used. A body that breaks the chunked framing ends where it breaks: what follows is not
    /// a body this reader can tell from framing.
    fn next<'b>(&mut self, bytes: &'b [u8]) -> (&'b [u8], usize) {
        match *self {
            Body::Done => (&[], bytes.len()),
            Body::UntilClose => (bytes, bytes.len()),
            Body::Length(left) | Body::ChunkData(left) => {
                let n = usize::try_from(left).unwrap_or(usize::MAX).min(bytes.len());
                let left = left - n as u64;
                *self = match (*self, left) {
                    (Body::Length(_), 0) => Body::Done,
                    (Body::Length(_), l) => Body::Length(l),
                    (_, 0) => Body::ChunkEnd,
                    (_, l) => Body::ChunkData(l),
                };
                (&bytes[..n], n)
            }
            Body::ChunkSize { .. } | Body::ChunkEnd => {
                self.step(bytes[0]);
                (&[], 1)
            }
        }
    }

    /// One byte of chunk framing.
    fn step(&mut self, b: u8) {
        *self = match (*self, b) {
            (Body::ChunkEnd, b'\r') => Body::ChunkEnd,
            (Body::ChunkEnd, b'\n') => Body::ChunkSize { size: 0, digits: false, ext: false },
            (Body::ChunkSize { size, ext: false, .. }, b) if b.is_ascii_hexdigit() => {
                let digit = u64::from((b as char).to_digit(16).unwrap_or(0));
                match size.checked_mul(16).and_then(|s| s.checked_add(digit)) {
                    Some(size) => Body::ChunkSize { size, digits: true, ext: false },
                    None => Body::Done,
                }
            }
            // The last chunk (size 0) ends the body; trailers say nothing about a page.
            (Body::ChunkSize { size: 0, digits: true, .. }, b'\n') => Body::Done,
            (Body::ChunkSize { size, digits: true, .. }, b'\n') => Body::ChunkData(size),
            (s @ Body::ChunkSize { .. }, b'\r') => s,
            (Body::ChunkSize { size, digits: true, .. }, _) => {
                Body::ChunkSize { size, digits: true, ext: true }
            }
            _ => Body::Done,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &[u8] = b"<html><title>Access denied</title><p>This site is BLOCKED by order.</p></html>";
    const PATTERN: &[u8] = b"BLOCKED by order";

    fn header<'a>(name: &'a str, value: &'a str) -> httparse::Header<'a> {
        httparse::Header { name, value: value.as_bytes() }
    }

    fn scan_all(pattern: &[u8], framing: Framing, feeds: &[&[u8]]) -> Scanned {
        let mut scan = Scan::new(pattern, framing);
        let mut state = Scanned::More;
        for f in feeds {
            state = scan.feed(f);
            if state != Scanned::More {
                break;
            }
        }
        state
    }

    /// `body` as chunks of `sizes` (the rest in a last one), with an extension on each.
    fn chunked(body: &[u8], sizes: &[usize]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut rest = body;
        for &n in sizes.iter().chain(std::iter::once(&usize::MAX)) {
            let (chunk, tail) = rest.split_at(n.min(rest.len()));
            if !chunk.is_empty() {
                out.extend_from_slice(format!("{:X};name=\"v\"\r\n", chunk.len()).as_bytes());
                out.extend_from_slice(chunk);
                out.extend_from_slice(b"\r\n");
            }
            rest = tail;
        }
        out.extend_from_slice(b"0\r\nTrailer: x\r\n\r\n");
        out
    }

    #[test]
    fn framing_follows_the_head() {
        let cl = [header("Content-Length", " 42 ")];
        assert_eq!(Framing::of(200, &cl, false), Framing::Length(42));
        assert_eq!(Framing::of(200, &cl, true), Framing::Empty, "an answer to HEAD has no body");
        for status in [100, 101, 204, 304] {
            assert_eq!(Framing::of(status, &cl, false), Framing::Empty, "{status}");
        }
        let te = [header("content-length", "5"), header("Transfer-Encoding", "gzip, Chunked")];
        assert_eq!(Framing::of(200, &te, false), Framing::Chunked, "chunked last wins over the length");
        let te = [header("Transfer-Encoding", "chunked"), header("Transfer-Encoding", "gzip")];
        assert_eq!(Framing::of(200, &te, false), Framing::UntilClose);
        assert_eq!(Framing::of(200, &[], false), Framing::UntilClose);
        assert_eq!(Framing::of(200, &[header("Content-Length", "-1")], false), Framing::UntilClose);
    }

    #[test]
    fn a_pattern_split_across_reads_is_found_wherever_it_is_split() {
        for split in 0..=PAGE.len() {
            let (a, b) = PAGE.split_at(split);
            assert_eq!(scan_all(PATTERN, Framing::UntilClose, &[a, b]), Scanned::Found, "split at {split}");
        }
        let bytes: Vec<&[u8]> = PAGE.chunks(1).collect();
        assert_eq!(scan_all(PATTERN, Framing::UntilClose, &bytes), Scanned::Found, "a byte at a time");
        let threes: Vec<&[u8]> = PAGE.chunks(3).collect();
        assert_eq!(scan_all(PATTERN, Framing::Length(PAGE.len() as u64), &threes), Scanned::Found);
        assert_eq!(scan_all(b"P", Framing::UntilClose, &[b"xx", b"P"]), Scanned::Found, "one-byte pattern");
    }

    #[test]
    fn a_normal_page_is_clean_at_its_end_and_not_before() {
        let page = b"<html>Welcome to the mirror</html>";
        let mut scan = Scan::new(PATTERN, Framing::Length(page.len() as u64));
        assert_eq!(scan.feed(&page[..10]), Scanned::More);
        assert_eq!(scan.feed(&page[10..]), Scanned::Clean);
        // Until the close, the end is the close: the caller stops feeding.
        assert_eq!(scan_all(PATTERN, Framing::UntilClose, &[page]), Scanned::More);
        assert_eq!(scan_all(PATTERN, Framing::Empty, &[b""]), Scanned::Clean);
        assert_eq!(scan_all(PATTERN, Framing::Length(0), &[PAGE]), Scanned::Clean);
    }

    #[test]
    fn bytes_past_the_content_length_are_not_body() {
        let mut wire = b"short page".to_vec();
        wire.extend_from_slice(PAGE);
        assert_eq!(scan_all(PATTERN, Framing::Length(10), &[&wire]), Scanned::Clean);
    }

    #[test]
    fn chunked_bodies_are_searched_without_their_framing() {
        let at = PAGE.windows(PATTERN.len()).position(|w| w == PATTERN).unwrap();
        // The pattern split across two chunks, and each chunk across reads.
        let wire = chunked(PAGE, &[at + 4]);
        for split in 0..=wire.len() {
            let (a, b) = wire.split_at(split);
            assert_eq!(scan_all(PATTERN, Framing::Chunked, &[a, b]), Scanned::Found, "split at {split}");
        }
        let bytes: Vec<&[u8]> = wire.chunks(1).collect();
        assert_eq!(scan_all(PATTERN, Framing::Chunked, &bytes), Scanned::Found);
        // The framing between the chunks is not part of the body.
        let wire = chunked(b"abcd", &[2]);
        assert_eq!(scan_all(b"bc", Framing::Chunked, &[&wire]), Scanned::Found);
        assert_eq!(scan_all(b"b\r\n", Framing::Chunked, &[&wire]), Scanned::Clean);
        assert_eq!(scan_all(b"name", Framing::Chunked, &[&wire]), Scanned::Clean, "extensions neither");
        assert_eq!(scan_all(b"Trailer", Framing::Chunked, &[&wire]), Scanned::Clean, "nor trailers");
    }

    #[test]
    fn broken_chunk_framing_ends_the_body() {
        assert_eq!(scan_all(PATTERN, Framing::Chunked, &[b"zz\r\n", PAGE]), Scanned::Clean);
        assert_eq!(scan_all(PATTERN, Framing::Chunked, &[b";x\r\n", PAGE]), Scanned::Clean);
        let mut wire = b"3\r\nabcXX".to_vec();
        wire.extend_from_slice(PAGE);
        assert_eq!(scan_all(PATTERN, Framing::Chunked, &[&wire]), Scanned::Clean, "no CRLF after the data");
        let huge = b"ffffffffffffffffff\r\n";
        assert_eq!(scan_all(PATTERN, Framing::Chunked, &[huge, PAGE]), Scanned::Clean, "size overflows");
    }

    #[test]
    fn the_scan_stops_at_the_bound() {
        let mut near = vec![b'.'; BODY_LIMIT - PATTERN.len()];
        near.extend_from_slice(PATTERN);
        near.extend_from_slice(b"and more");
        let reads: Vec<&[u8]> = near.chunks(1000).collect();
        assert_eq!(scan_all(PATTERN, Framing::UntilClose, &reads), Scanned::Found, "within the bound");

        let mut far = vec![b'.'; BODY_LIMIT - PATTERN.len() + 1];
        far.extend_from_slice(PATTERN);
        let reads: Vec<&[u8]> = far.chunks(1000).collect();
        assert_eq!(scan_all(PATTERN, Framing::UntilClose, &reads), Scanned::Clean, "one byte past it");

        // Clean once the bound is read, though the body goes on.
        let mut scan = Scan::new(PATTERN, Framing::Length(10 * BODY_LIMIT as u64));
        assert_eq!(scan.feed(&vec![b'.'; BODY_LIMIT - 1]), Scanned::More);
        assert_eq!(scan.feed(b".."), Scanned::Clean);
        assert_eq!(scan.feed(PATTERN), Scanned::Clean, "nothing past the bound is looked at");
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        const ALPHABET: &[u8] = b"0123456789abcdefXYZ;\r\n \t";
        for round in 0..300 {
            let framing = [Framing::Chunked, Framing::UntilClose, Framing::Length(round)][round as usize % 3];
            let mut scan = Scan::new(b"\r\n0", framing);
            for _ in 0..20 {
                let len = (next() % 40) as usize;
                let bytes: Vec<u8> = (0..len).map(|_| ALPHABET[next() as usize % ALPHABET.len()]).collect();
                if scan.feed(&bytes) != Scanned::More {
                    break;
                }
            }
        }
        assert_eq!(
            scan_all(b"", Framing::UntilClose, &[b"x"]),
            Scanned::Found,
            "an empty pattern is anywhere"
        );
    }
}

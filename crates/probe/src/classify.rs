//! Which [`ErrorCode`] a failure is. Every failed attempt gets exactly one, decided by the
//! error's kind and by the phase the attempt was in when it failed.

use std::error::Error as StdError;
use std::io;

use vantage_core::result::ErrorCode;

/// Where in an attempt an error happened; decides the code of errors that say little.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Opening the TCP connection.
    Connect,
    /// The TLS handshake.
    Tls,
    /// Writing the request (or PROXY header) and reading the response.
    Exchange,
}

/// Linux's EHOSTDOWN, which the standard library leaves uncategorised.
const EHOSTDOWN: i32 = 112;

/// The code of an I/O error in `phase`.
pub(crate) fn code_for_io(e: &io::Error, phase: Phase) -> ErrorCode {
    use io::ErrorKind as K;
    match e.kind() {
        K::TimedOut => ErrorCode::Timeout,
        K::ConnectionRefused => ErrorCode::Refused,
        K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe => ErrorCode::Reset,
        K::NetworkUnreachable | K::HostUnreachable | K::NetworkDown | K::AddrNotAvailable => {
            ErrorCode::Unreachable
        }
        _ if cfg!(target_os = "linux") && e.raw_os_error() == Some(EHOSTDOWN) => ErrorCode::Unreachable,
        _ => match phase {
            // A connect that fails for another reason did not get through the network.
            Phase::Connect => ErrorCode::Unreachable,
            // Anything else that goes wrong in a handshake (a peer that speaks something
            // else, an alert, a close mid-handshake) is a failed handshake.
            Phase::Tls => ErrorCode::Tls,
            // The peer closed before the answer was complete (UnexpectedEof and the like).
            Phase::Exchange => ErrorCode::Reset,
        },
    }
}

/// The code of an HTTP client error in the exchange phase.
pub(crate) fn code_for_hyper(e: &hyper::Error) -> ErrorCode {
    if let Some(io) = io_source(e) {
        return code_for_io(io, Phase::Exchange);
    }
    if e.is_parse() {
        // Bytes came back, but not an HTTP response: something other than the expected
        // listener answers on this port.
        return ErrorCode::Status;
    }
    // Incomplete message, closed channel, canceled: the peer hung up before answering.
    ErrorCode::Reset
}

/// The first I/O error in an error's source chain.
pub(crate) fn io_source<'a>(e: &'a (dyn StdError + 'static)) -> Option<&'a io::Error> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<io::Error>() {
            return Some(io);
        }
        cur = err.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreachable_network_and_host_errnos() {
        // ENETUNREACH, EHOSTUNREACH, ENETDOWN, EHOSTDOWN, EADDRNOTAVAIL on Linux.
        for errno in [101, 113, 100, 112, 99] {
            let e = io::Error::from_raw_os_error(errno);
            assert_eq!(code_for_io(&e, Phase::Connect), ErrorCode::Unreachable, "errno {errno} ({e})");
            assert_eq!(code_for_io(&e, Phase::Exchange), ErrorCode::Unreachable);
        }
        for kind in [io::ErrorKind::NetworkUnreachable, io::ErrorKind::HostUnreachable] {
            assert_eq!(code_for_io(&kind.into(), Phase::Connect), ErrorCode::Unreachable);
        }
    }

    #[test]
    fn refused_reset_timeout_errnos() {
        let code = |errno, phase| code_for_io(&io::Error::from_raw_os_error(errno), phase);
        assert_eq!(code(111, Phase::Connect), ErrorCode::Refused); // ECONNREFUSED
        assert_eq!(code(104, Phase::Exchange), ErrorCode::Reset); // ECONNRESET
        assert_eq!(code(104, Phase::Tls), ErrorCode::Reset);
        assert_eq!(code(32, Phase::Exchange), ErrorCode::Reset); // EPIPE
        assert_eq!(code(110, Phase::Connect), ErrorCode::Timeout); // ETIMEDOUT
    }

    #[test]
    fn vague_errors_are_decided_by_phase() {
        let eof = || io::Error::from(io::ErrorKind::UnexpectedEof);
        assert_eq!(code_for_io(&eof(), Phase::Tls), ErrorCode::Tls);
        assert_eq!(code_for_io(&eof(), Phase::Exchange), ErrorCode::Reset);
        let invalid = io::Error::new(io::ErrorKind::InvalidData, "corrupt message");
        assert_eq!(code_for_io(&invalid, Phase::Tls), ErrorCode::Tls);
        assert_eq!(code_for_io(&io::Error::other("?"), Phase::Connect), ErrorCode::Unreachable);
    }

    #[test]
    fn io_errors_are_found_through_wrappers() {
        #[derive(Debug)]
        struct Wrap(io::Error);
        impl std::fmt::Display for Wrap {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("wrapped")
            }
        }
        impl StdError for Wrap {
            fn source(&self) -> Option<&(dyn StdError + 'static)> {
                Some(&self.0)
            }
        }
        let w = Wrap(io::ErrorKind::ConnectionReset.into());
        assert_eq!(io_source(&w).map(io::Error::kind), Some(io::ErrorKind::ConnectionReset));
    }
}

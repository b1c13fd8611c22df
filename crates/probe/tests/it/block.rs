//! The block-page pattern of `http`/`https` checks against real servers on loopback: a page
//! of the expected status whose body holds the pattern is `blocked`; any other page is as
//! before.

use std::time::Duration;

use vantage_core::check::CheckInput;
use vantage_core::result::{ErrorCode, Stages};
use vantage_probe::{Method, ProbeTarget, RoundConfig, attempt, run_round};
use vantage_testkit::{Behavior, EdgeOptions, EdgeServer, any_loopback};

use crate::check;

const T: Duration = Duration::from_secs(2);
const PATTERN: &str = "blocked by order of";
const BLOCK_PAGE: &str = "<html><head><title>Access denied</title></head><body>This site is blocked by order of the court.</body></html>";
const NORMAL_PAGE: &str = "<html><body>Welcome to the mirror.</body></html>";

fn blocking(server: &EdgeServer, method: Method, input: CheckInput) -> ProbeTarget {
    let c = check(CheckInput { block_pattern: Some(PATTERN.into()), ..input });
    ProbeTarget::new("t", server.addr(), method, c)
}

fn received() -> Stages {
    Stages::CONNECTED.with(Stages::SENT).with(Stages::RECEIVED)
}

#[tokio::test]
async fn a_block_page_is_blocked_and_a_normal_page_is_good() {
    vantage_testkit::init_tracing();
    let server =
        EdgeServer::start_with(any_loopback(), EdgeOptions::new(Behavior::Health).with_body(BLOCK_PAGE))
            .await
            .unwrap();
    let t = blocking(&server, Method::Http, CheckInput::default());
    let r = attempt(&t, T).await;
    assert_eq!(r.error, Some(ErrorCode::Blocked), "{r:?}");
    assert_eq!((r.stages, r.status), (received(), Some(200)), "{r:?}");
    assert!(r.detail.as_deref().unwrap().contains(PATTERN), "{r:?}");
    assert!(!r.attempt().good());
    assert_eq!(r.attempt().error, Some(ErrorCode::Blocked));

    server.set_body(NORMAL_PAGE);
    let r = attempt(&t, T).await;
    assert_eq!((r.error, r.stages), (None, Stages::ALL), "{r:?}");

    // A round reports the code like any other.
    server.set_body(BLOCK_PAGE);
    let results = run_round(&[t], &RoundConfig { attempts: 2, ..RoundConfig::default() }).await;
    assert_eq!((results[0].sent(), results[0].lost()), (2, 2), "{results:?}");
    assert_eq!(results[0].last_error(), Some(ErrorCode::Blocked));
}

#[tokio::test]
async fn https_block_pages_are_blocked_too() {
    let opts = EdgeOptions::new(Behavior::Health).with_self_signed_tls().unwrap().with_body(BLOCK_PAGE);
    let server = EdgeServer::start_with(any_loopback(), opts).await.unwrap();
    let r = attempt(&blocking(&server, Method::Https, CheckInput::default()), T).await;
    assert_eq!((r.error, r.stages), (Some(ErrorCode::Blocked), received()), "{r:?}");
    server.set_body(NORMAL_PAGE);
    let r = attempt(&blocking(&server, Method::Https, CheckInput::default()), T).await;
    assert_eq!(r.error, None, "{r:?}");
}

#[tokio::test]
async fn a_pattern_split_across_chunks_and_reads_is_found() {
    // The page goes out in two chunks, apart, that meet in the middle of the pattern.
    let page = format!("<p>{PATTERN}</p>");
    let (middle, at) = (page.len() / 2, page.find(PATTERN).unwrap());
    assert!(at < middle && middle < at + PATTERN.len(), "the split falls inside the pattern");
    let server = EdgeServer::start_with(any_loopback(), EdgeOptions::new(Behavior::Chunked).with_body(page))
        .await
        .unwrap();
    let t = blocking(&server, Method::Http, CheckInput::default());
    let r = attempt(&t, T).await;
    assert_eq!((r.error, r.stages), (Some(ErrorCode::Blocked), received()), "{r:?}");

    server.set_body(NORMAL_PAGE);
    let r = attempt(&t, T).await;
    assert_eq!((r.error, r.stages), (None, Stages::ALL), "{r:?}");
}

#[tokio::test]
async fn an_unexpected_status_stays_status_and_no_pattern_reads_no_body() {
    let opts = EdgeOptions::new(Behavior::Health).with_status(503).with_body(BLOCK_PAGE);
    let server = EdgeServer::start_with(any_loopback(), opts).await.unwrap();
    let r = attempt(&blocking(&server, Method::Http, CheckInput::default()), T).await;
    assert_eq!((r.error, r.status), (Some(ErrorCode::Status), Some(503)), "{r:?}");

    // Without a pattern the block page is a good answer, as before.
    server.set_status(200);
    let plain = ProbeTarget::new("t", server.addr(), Method::Http, check(CheckInput::default()));
    assert_eq!(attempt(&plain, T).await.error, None);
}

#[tokio::test]
async fn a_clean_body_of_known_length_is_good_without_waiting_for_the_close() {
    // `200 ok` with a length, then the connection held open.
    let server = EdgeServer::start_with(any_loopback(), EdgeOptions::new(Behavior::KeepOpen)).await.unwrap();
    let timeout = Duration::from_millis(500);
    let t = blocking(&server, Method::Http, CheckInput { expect_close: Some(false), ..Default::default() });
    let r = attempt(&t, timeout).await;
    assert_eq!(r.error, None, "{r:?}");
    assert!(r.timings.total < Duration::from_millis(400), "the body ended at its length: {r:?}");
    // With `expect_close` the close is still waited for after a clean body.
    let t = blocking(&server, Method::Http, CheckInput::default());
    let r = attempt(&t, timeout).await;
    assert_eq!((r.error, r.stages), (Some(ErrorCode::Timeout), received()), "{r:?}");
}

#[tokio::test]
async fn only_the_first_64_kib_of_a_body_are_searched() {
    let page = |filler: usize| format!("<html>{}{BLOCK_PAGE}</html>", " ".repeat(filler));
    let server =
        EdgeServer::start_with(any_loopback(), EdgeOptions::new(Behavior::Health).with_body(page(60_000)))
            .await
            .unwrap();
    let t = blocking(&server, Method::Http, CheckInput::default());
    assert_eq!(attempt(&t, T).await.error, Some(ErrorCode::Blocked), "within the bound");
    server.set_body(page(70_000));
    let r = attempt(&t, T).await;
    assert_eq!((r.error, r.stages), (None, Stages::ALL), "past the bound: {r:?}");
}

/// A mirror's target: any status is an answer.
fn mirror(server: &EdgeServer, input: CheckInput) -> ProbeTarget {
    ProbeTarget { any_status: true, ..ProbeTarget::new("m", server.addr(), Method::Http, check(input)) }
}

#[tokio::test]
async fn a_mirror_answering_any_status_is_good_and_its_block_page_is_read_whatever_the_status() {
    let opts = EdgeOptions::new(Behavior::Health).with_status(404).with_body(NORMAL_PAGE);
    let server = EdgeServer::start_with(any_loopback(), opts).await.unwrap();
    let r = attempt(&mirror(&server, CheckInput::default()), T).await;
    assert_eq!((r.error, r.stages, r.status), (None, Stages::ALL, Some(404)), "an answer: {r:?}");
    // The same answer to a target that is not a mirror is what it was.
    let plain = ProbeTarget::new("t", server.addr(), Method::Http, check(CheckInput::default()));
    assert_eq!(attempt(&plain, T).await.error, Some(ErrorCode::Status));
    // A block page answered with 403 is found by its pattern.
    server.set_status(403);
    server.set_body(BLOCK_PAGE);
    let with_pattern = CheckInput { block_pattern: Some(PATTERN.into()), ..CheckInput::default() };
    let r = attempt(&mirror(&server, with_pattern), T).await;
    assert_eq!((r.error, r.status), (Some(ErrorCode::Blocked), Some(403)), "{r:?}");
}

#[tokio::test]
async fn a_block_status_is_blocked_at_the_head() {
    let opts = EdgeOptions::new(Behavior::Health).with_status(451).with_body(NORMAL_PAGE);
    let server = EdgeServer::start_with(any_loopback(), opts).await.unwrap();
    let named = CheckInput { block_statuses: vec![403, 451], ..CheckInput::default() };
    let r = attempt(&mirror(&server, named.clone()), T).await;
    assert_eq!((r.error, r.stages, r.status), (Some(ErrorCode::Blocked), received(), Some(451)), "{r:?}");
    assert!(r.detail.as_deref().unwrap().contains("451"), "{r:?}");
    // Not named: an answer like any other.
    let r = attempt(&mirror(&server, CheckInput::default()), T).await;
    assert_eq!(r.error, None, "{r:?}");
    server.set_status(200);
    assert_eq!(attempt(&mirror(&server, named), T).await.error, None, "200 is not named");
}

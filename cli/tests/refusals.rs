//! `iomsg client` against an `iomsg server` that refuses it for good: the
//! client exits at once, naming the server's reason, instead of retrying
//! until its retry time is spent.

// Test setup that fails should stop the test where it failed.
#![allow(clippy::unwrap_used)]

mod procs;

use std::time::{Duration, Instant};

use procs::{free_port, one_at_a_time, scratch, Proc};

/// The longest a refused client may take, from its start to its exit:
/// the refusal itself takes milliseconds, the rest is starting a process
/// and UCX on a busy host. A client that retried would take its 30 s of
/// retry time.
const AT_ONCE: Duration = Duration::from_secs(2);

/// A server on `server_api` and a client on `client_api`: the client
/// exits with 1 within [`AT_ONCE`], saying that the APIs differ.
fn the_other_api_ends_the_client_at_once(server_api: &str, client_api: &str) {
    let _one = one_at_a_time();
    let dir = scratch("refusal", &format!("{client_api}-to-{server_api}"));
    let listen = format!("127.0.0.1:{}", free_port());
    let mut server = Proc::start(
        &["server", "--listen", &listen, "--api", server_api],
        dir.join("server.out"),
    );
    server.wait_for("listening on", Duration::from_secs(15));
    let started = Instant::now();
    let mut client = Proc::start(
        &["client", &listen, "--api", client_api, "-i", "10"],
        dir.join("client.out"),
    );
    let status = client.wait(Duration::from_secs(60));
    let took = started.elapsed();
    let text = client.text();
    eprintln!("{client_api} client of a {server_api} server: {status} after {took:?}");
    assert_eq!(status.code(), Some(1), "{text}");
    let said = text
        .lines()
        .find(|l| l.starts_with("iomsg client: session"))
        .unwrap_or_else(|| panic!("no failure line: {text}"));
    assert!(said.contains("API mismatch"), "{said}");
    assert!(said.contains("--api"), "what to change: {said}");
    assert!(took < AT_ONCE, "the client took {took:?}: {text}");
    assert!(server.running(), "{}", server.text());
    server.stop();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_active_message_client_of_a_tag_server_exits_at_once_naming_the_api_mismatch() {
    the_other_api_ends_the_client_at_once("tag", "am");
}

#[test]
fn a_tag_client_of_an_active_message_server_exits_at_once_naming_the_api_mismatch() {
    the_other_api_ends_the_client_at_once("am", "tag");
}

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

/// A TCP client of a UCX server: UCX's listener takes the TCP connection
/// and never answers the Hello. The client cannot be refused (nobody
/// speaks its protocol), so it says, when its run ends, that it never
/// connected, how the attempts ended, and that the transports may differ.
#[test]
fn a_tcp_client_of_a_ucx_server_says_it_never_connected_and_names_the_transport() {
    let _one = one_at_a_time();
    let dir = scratch("refusal", "tcp-to-ucx");
    let listen = format!("127.0.0.1:{}", free_port());
    let mut server = Proc::start(
        &["server", "--listen", &listen, "--transport", "ucx"],
        dir.join("server.out"),
    );
    server.wait_for("listening on", Duration::from_secs(15));
    let mut client = Proc::start(
        &[
            "client",
            &listen,
            "--transport",
            "tcp",
            "-i",
            "10",
            "--drain",
            "3s",
        ],
        dir.join("client.out"),
    );
    let status = client.wait(Duration::from_secs(60));
    let text = client.text();
    assert_eq!(status.code(), Some(1), "{text}");
    let said = text
        .lines()
        .find(|l| l.contains("did not finish"))
        .unwrap_or_else(|| panic!("no line saying why: {text}"));
    assert!(said.contains("10 messages unacknowledged"), "{said}");
    assert!(
        said.contains("no connection was ever established"),
        "{said}"
    );
    assert!(said.contains("--transport"), "what to check: {said}");
    assert!(server.running(), "{}", server.text());
    server.stop();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A UCX client of a TCP server: the server says, for each of its
/// connections, that the peer does not speak iomsg's stream framing
/// (naming a UCX client) and goes on serving; the client gives up after
/// its retry time, saying to check that the server speaks its transport.
#[test]
fn a_ucx_client_of_a_tcp_server_is_named_by_the_server_and_told_to_check_the_transport() {
    let _one = one_at_a_time();
    let dir = scratch("refusal", "ucx-to-tcp");
    let listen = format!("127.0.0.1:{}", free_port());
    let mut server = Proc::start(
        &["server", "--listen", &listen, "--transport", "tcp"],
        dir.join("server.out"),
    );
    server.wait_for("listening on", Duration::from_secs(15));
    let mut client = Proc::start(
        &[
            "client",
            &listen,
            "--transport",
            "ucx",
            "-i",
            "10",
            "-r",
            "2",
            "--retry-for",
            "1s",
        ],
        dir.join("client.out"),
    );
    let status = client.wait(Duration::from_secs(60));
    let text = client.text();
    assert_eq!(status.code(), Some(1), "{text}");
    let said = text
        .lines()
        .find(|l| l.starts_with("iomsg client: session"))
        .unwrap_or_else(|| panic!("no failure line: {text}"));
    assert!(said.contains("gave up after"), "{said}");
    assert!(said.contains("speaks this transport"), "{said}");
    let served = server.text();
    assert!(
        served.contains("does not speak iomsg's stream framing (a UCX client"),
        "{served}"
    );
    assert!(server.running(), "{served}");
    server.stop();
    std::fs::remove_dir_all(&dir).unwrap();
}

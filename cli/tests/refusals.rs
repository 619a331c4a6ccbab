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

/// A server started with `server` and a client with `client` (after the
/// address), which exits with 1; what it said on its line containing
/// `line`, and how long it took.
struct Mismatch {
    dir: std::path::PathBuf,
    server: Proc,
    said: String,
    text: String,
    took: Duration,
}

impl Mismatch {
    fn run(name: &str, server: &[&str], client: &[&str], line: &str) -> Mismatch {
        let dir = scratch("refusal", name);
        let listen = format!("127.0.0.1:{}", free_port());
        let mut args = vec!["server", "--listen", &listen];
        args.extend_from_slice(server);
        let mut server = Proc::start(&args, dir.join("server.out"));
        server.wait_for("listening on", Duration::from_secs(15));
        let started = Instant::now();
        let mut args = vec!["client", &listen];
        args.extend_from_slice(client);
        let mut client = Proc::start(&args, dir.join("client.out"));
        let status = client.wait(Duration::from_secs(60));
        let took = started.elapsed();
        let text = client.text();
        eprintln!("{name}: {status} after {took:?}");
        assert_eq!(status.code(), Some(1), "{text}");
        let said = text
            .lines()
            .find(|l| l.contains(line))
            .unwrap_or_else(|| panic!("no line with {line:?}: {text}"))
            .to_string();
        Mismatch {
            dir,
            server,
            said,
            text,
            took,
        }
    }

    /// The server still serves; it is stopped and the files go.
    fn server_went_on(mut self) {
        assert!(self.server.running(), "{}", self.server.text());
        self.server.stop();
        std::fs::remove_dir_all(&self.dir).unwrap();
    }
}

/// A server on `server_api` and a client on `client_api`: the client
/// exits with 1 within [`AT_ONCE`], saying that the APIs differ.
fn the_other_api_ends_the_client_at_once(server_api: &str, client_api: &str) {
    let _one = one_at_a_time();
    let m = Mismatch::run(
        &format!("{client_api}-to-{server_api}"),
        &["--api", server_api],
        &["--api", client_api, "-i", "10"],
        "iomsg client: session",
    );
    assert!(m.said.contains("API mismatch"), "{}", m.said);
    assert!(m.said.contains("--api"), "what to change: {}", m.said);
    assert!(m.took < AT_ONCE, "the client took {:?}: {}", m.took, m.text);
    m.server_went_on();
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
    let m = Mismatch::run(
        "tcp-to-ucx",
        &["--transport", "ucx"],
        &["--transport", "tcp", "-i", "10", "--drain", "3s"],
        "did not finish",
    );
    assert!(m.said.contains("10 messages unacknowledged"), "{}", m.said);
    assert!(
        m.said.contains("no connection was ever established"),
        "{}",
        m.said
    );
    assert!(m.said.contains("--transport"), "what to check: {}", m.said);
    m.server_went_on();
}

/// A UCX client of a TCP server: the server says, for each of its
/// connections, that the peer does not speak iomsg's stream framing
/// (naming a UCX client) and goes on serving; the client gives up after
/// its retry time, saying to check that the server speaks its transport.
#[test]
fn a_ucx_client_of_a_tcp_server_is_named_by_the_server_and_told_to_check_the_transport() {
    let _one = one_at_a_time();
    let m = Mismatch::run(
        "ucx-to-tcp",
        &["--transport", "tcp"],
        &[
            "--transport",
            "ucx",
            "-i",
            "10",
            "-r",
            "2",
            "--retry-for",
            "1s",
        ],
        "iomsg client: session",
    );
    assert!(m.said.contains("gave up after"), "{}", m.said);
    assert!(m.said.contains("speaks this transport"), "{}", m.said);
    let served = m.server.text();
    assert!(
        served.contains("does not speak iomsg's stream framing (a UCX client"),
        "{served}"
    );
    m.server_went_on();
}

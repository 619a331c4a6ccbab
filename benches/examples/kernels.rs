//! The core's kernels in a plain loop, for counting instructions per call
//! under `valgrind --tool=callgrind` (`ci/callgrind`): the kernels and
//! inputs of `benches/core.rs`, without criterion around them.
//!
//! ```text
//! cargo build --release -p iomsg-benches --example kernels
//! target/release/examples/kernels KERNEL N   # KERNEL's setup, then N calls
//! target/release/examples/kernels list       # the kernel names, one a line
//! target/release/examples/kernels crc-path   # the CRC32C provider of this run
//! ```
//!
//! Each kernel builds its inputs the same way whatever N is, then makes N
//! calls with its inputs and outputs behind [`black_box`], so two runs with
//! N1 and N2 calls differ by exactly N2 - N1 calls (the loop included), and
//! `(I2 - I1) / (N2 - N1)` instructions is the cost of one call, free of
//! process startup and setup. `empty` is that loop alone.
//!
//! Exits 0 after the calls, 1 if a kernel's input is refused (the count
//! would then be of the error path), 2 on bad arguments.

use std::hint::black_box;
use std::process::ExitCode;

use iomsg_benches::ack;
use iomsg_core::rng::SplitMix64;
use iomsg_core::seq::{DefaultTracker, PayloadRing, SendWindow};
use iomsg_core::wire::{parse_with, Body, Crc32c, IoMsg};

/// A kernel: its name on the command line, what one call does, and the run
/// of N calls.
struct Kernel {
    name: &'static str,
    call: &'static str,
    run: fn(u64),
}

const KERNELS: [Kernel; 14] = [
    Kernel {
        name: "empty",
        call: "nothing: the loop and black_box alone",
        run: empty,
    },
    Kernel {
        name: "header_emit",
        call: "emit a 48-byte Ack header (header CRC included)",
        run: header_emit,
    },
    Kernel {
        name: "header_parse",
        call: "parse that header",
        run: header_parse,
    },
    Kernel {
        name: "header_emit_parse",
        call: "emit, then parse, the header",
        run: header_emit_parse,
    },
    Kernel {
        name: "crc_64",
        call: "parse a validated Write of 64 payload bytes (payload CRC32C)",
        run: crc_64,
    },
    Kernel {
        name: "crc_4k",
        call: "parse a validated Write of 4096 payload bytes",
        run: crc_4k,
    },
    Kernel {
        name: "crc_64k",
        call: "parse a validated Write of 65536 payload bytes",
        run: crc_64k,
    },
    Kernel {
        name: "tracker_in_order",
        call: "check + commit the next sn",
        run: tracker_in_order,
    },
    Kernel {
        name: "tracker_loss_1pct",
        call: "check + commit the next sn, one sn in 100 never sent",
        run: tracker_loss_1pct,
    },
    Kernel {
        name: "tracker_random_window",
        call: "check + commit one sn of a shuffled block of 1024",
        run: tracker_random_window,
    },
    Kernel {
        name: "tracker_duplicates",
        call: "check an sn that already arrived",
        run: tracker_duplicates,
    },
    Kernel {
        name: "send_window",
        call: "alloc + copy 64 payload bytes, push, ack, release",
        run: send_window,
    },
    Kernel {
        name: "loopback_64",
        call: "one streamed 64 B write through the full protocol over loopback",
        run: loopback_64,
    },
    Kernel {
        name: "loopback_64_journal",
        call: "loopback_64 with the server keeping a journal (records counted)",
        run: loopback_64_journal,
    },
];

/// Stops the run: a kernel's input was refused, so its loop would count an
/// error path instead of the kernel.
#[cold]
fn refused(kernel: &str, why: impl std::fmt::Display) -> ! {
    eprintln!(
        "kernels: {kernel}: input refused: {why}; the kernel's setup in \
         benches/examples/kernels.rs no longer fits the core: fix the setup"
    );
    std::process::exit(1)
}

fn empty(n: u64) {
    for i in 0..n {
        black_box(i);
    }
}

fn header_emit(n: u64) {
    let crc = crc();
    let msg = ack();
    let mut buf = [0u8; 48];
    if let Err(e) = msg.emit_with(&mut buf, &crc) {
        refused("header_emit", e);
    }
    for _ in 0..n {
        let _ = black_box(black_box(&msg).emit_with(black_box(&mut buf), &crc));
    }
}

fn header_parse(n: u64) {
    let crc = crc();
    let mut buf = [0u8; 48];
    if let Err(e) = ack().emit_with(&mut buf, &crc) {
        refused("header_parse", e);
    }
    if let Err(e) = parse_with(&buf, &crc) {
        refused("header_parse", e);
    }
    for _ in 0..n {
        let _ = black_box(parse_with(black_box(&buf), &crc));
    }
}

fn header_emit_parse(n: u64) {
    let crc = crc();
    let msg = ack();
    let mut buf = [0u8; 48];
    match msg.emit_with(&mut buf, &crc) {
        Ok(len) => {
            if let Err(e) = parse_with(&buf[..len], &crc) {
                refused("header_emit_parse", e);
            }
        }
        Err(e) => refused("header_emit_parse", e),
    }
    for _ in 0..n {
        let len = black_box(&msg)
            .emit_with(black_box(&mut buf), &crc)
            .unwrap_or(0);
        black_box(parse_with(black_box(&buf[..len]), &crc).is_ok());
    }
}

/// Parsing a validated `Write` of `size` payload bytes: the payload CRC
/// dominates past a few hundred bytes.
fn payload_crc(kernel: &str, size: usize, n: u64) {
    let crc = crc();
    let data: Vec<u8> = (0..size).map(|i| (i * 131 % 251) as u8).collect();
    let msg = IoMsg {
        validate: true,
        body: Body::Write { data: &data },
        ..ack()
    };
    let mut frame = vec![0u8; msg.buffer_len()];
    if let Err(e) = msg.emit_with(&mut frame, &crc) {
        refused(kernel, e);
    }
    if let Err(e) = parse_with(&frame, &crc) {
        refused(kernel, e);
    }
    for _ in 0..n {
        black_box(parse_with(black_box(&frame), &crc).is_ok());
    }
}

fn crc_64(n: u64) {
    payload_crc("crc_64", 64, n);
}

fn crc_4k(n: u64) {
    payload_crc("crc_4k", 4096, n);
}

fn crc_64k(n: u64) {
    payload_crc("crc_64k", 65536, n);
}

fn tracker_in_order(n: u64) {
    let mut t = DefaultTracker::default();
    for sn in 0..n {
        black_box(t.check(black_box(sn)));
        t.commit(sn, |_| {});
    }
    if t.cumulative() != n {
        refused("tracker_in_order", "an in-order sn was not taken");
    }
}

fn tracker_loss_1pct(n: u64) {
    let mut t = DefaultTracker::default();
    let mut sn = 0u64;
    for _ in 0..n {
        if sn % 100 == 99 {
            sn += 1;
        }
        black_box(t.check(black_box(sn)));
        t.commit(sn, |_| {});
        sn += 1;
    }
    if t.top() != sn {
        refused("tracker_loss_1pct", "an sn was refused");
    }
}

/// Sns arrive in blocks of 1024, each block in the same shuffled order:
/// out of order, but always inside the tracker's window of 2048. Unlike
/// `benches/core.rs` (a fresh tracker and a fresh order per block, made
/// outside the timing) one tracker goes on, so the setup is the same for
/// every N.
fn tracker_random_window(n: u64) {
    const BLOCK: u64 = 1024;
    let mut rng = SplitMix64::new(1);
    let mut order: Vec<u64> = (0..BLOCK).collect();
    for i in (1..order.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        order.swap(i, j);
    }
    let mut t = DefaultTracker::default();
    let mut base = 0u64;
    while base < n {
        let take = (n - base).min(BLOCK) as usize;
        for &offset in &order[..take] {
            let sn = base + offset;
            black_box(t.check(sn));
            t.commit(sn, |_| {});
        }
        base += BLOCK;
    }
    if t.lost() != 0 {
        refused("tracker_random_window", "an sn fell out of the window");
    }
}

fn tracker_duplicates(n: u64) {
    let mut t = DefaultTracker::default();
    for sn in 0..1024 {
        t.commit(sn, |_| {});
    }
    let mut sn = 0u64;
    for _ in 0..n {
        sn = (sn + 1) % 1024;
        black_box(t.check(black_box(sn)));
    }
}

fn send_window(n: u64) {
    let mut window: SendWindow<u64, 1024> = SendWindow::new(0);
    let mut ring = PayloadRing::new(vec![0u8; 1024 * 64]);
    let payload = [7u8; 64];
    for _ in 0..n {
        let (pos, buf) = match ring.alloc(64) {
            Ok(slot) => slot,
            Err(e) => refused("send_window", e),
        };
        buf.copy_from_slice(black_box(&payload));
        let sn = match window.push(pos) {
            Ok(sn) => sn,
            Err(e) => refused("send_window", e),
        };
        // Acknowledged at once: the window and its bytes are released.
        let _ = window.release(sn + 1);
        ring.release_to(ring.head());
    }
    black_box(&ring);
}

/// The full protocol over the loopback network, as `benches/loopback.rs`
/// runs it: N streamed writes of 64 bytes, sent, delivered and
/// acknowledged (the client and server drivers and the network together).
fn loopback_64(n: u64) {
    let mut pair = iomsg_benches::Pair::with_crc(64, crc());
    let before = pair.taken();
    pair.run(n);
    if pair.taken() - before != n {
        refused("loopback_64", "not every write reached the server once");
    }
}

fn loopback_64_journal(n: u64) {
    let mut pair = iomsg_benches::Pair::with_journal(64, crc());
    let before = pair.taken();
    pair.run(n);
    if pair.taken() - before != n || pair.journal_bytes() == 0 {
        refused("loopback_64_journal", "a write lost, or no journal record");
    }
}

/// The CRC32C provider the header and payload kernels use: what the
/// library's users get by default, iomsg-ucx's run-time detected
/// instruction ([`iomsg_ucx::crc32c_provider`]); with `KERNELS_CRC=builtin`
/// in the environment the core's own path ([`Crc32c::BUILTIN`]: the
/// `crc32c` crate's run-time detection in a default build, the instruction
/// compiled in with `+sse4.2`), with `KERNELS_CRC=portable` its table.
fn crc() -> Crc32c {
    match std::env::var("KERNELS_CRC").as_deref() {
        Ok("builtin") => Crc32c::BUILTIN,
        Ok("portable") => Crc32c::PORTABLE,
        _ => iomsg_ucx::crc32c_provider(),
    }
}

/// What computes the CRC32C in this run, and what `KERNELS_CRC` chose.
fn crc_path() -> String {
    let chosen = std::env::var("KERNELS_CRC").unwrap_or_else(|_| "backend".into());
    format!("{} (KERNELS_CRC={chosen})", crc().name())
}

fn usage() -> String {
    let mut text = String::from(
        "usage: kernels KERNEL N   KERNEL's setup, then N calls of it\n       \
         kernels list       the kernel names\n       \
         kernels crc-path   the CRC32C provider of this run on this CPU\n\n\
         N may have underscores (110_000). One call of each kernel:\n",
    );
    for k in &KERNELS {
        text.push_str(&format!("  {:<22} {}\n", k.name, k.call));
    }
    text.push_str("\nExit status: 0 done, 1 a kernel's input was refused, 2 bad arguments.");
    text
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["list"] => {
            for k in &KERNELS {
                println!("{}", k.name);
            }
        }
        ["crc-path"] => println!("{}", crc_path()),
        ["-h" | "--help"] => println!("{}", usage()),
        [name, n] => {
            let Some(kernel) = KERNELS.iter().find(|k| k.name == *name) else {
                eprintln!("kernels: no kernel '{name}'\n{}", usage());
                return ExitCode::from(2);
            };
            let n = match n.replace('_', "").parse::<u64>() {
                Ok(n) => n,
                Err(e) => {
                    eprintln!("kernels: N must be a count of calls, not '{n}': {e}");
                    return ExitCode::from(2);
                }
            };
            (kernel.run)(n);
        }
        _ => {
            eprintln!("kernels: expected KERNEL N, list or crc-path\n{}", usage());
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}

//! The core's kernels: header emit and parse, payload CRCs, the sequence
//! tracker, the send window.

// criterion_group! makes an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use iomsg_benches::ack;
use iomsg_core::rng::SplitMix64;
use iomsg_core::seq::{DefaultTracker, PayloadRing, SendWindow};
use iomsg_core::wire::{parse_with, Body, Crc32c, IoMsg};

/// The header kernels with the CRC32C provider a library user gets by
/// default (iomsg-ucx's run-time detected instruction), and the pair with
/// the core's own path (`builtin`: the `crc32c` crate in this build).
fn header(c: &mut Criterion) {
    let mut g = c.benchmark_group("header");
    g.throughput(Throughput::Elements(1));
    let crc = iomsg_ucx::crc32c_provider();
    let msg = ack();
    let mut buf = [0u8; 48];
    g.bench_function("emit", |b| {
        b.iter(|| black_box(&msg).emit_with(black_box(&mut buf), &crc))
    });
    let _ = msg.emit_with(&mut buf, &crc);
    // The verdict only, as in emit+parse: returning the whole parsed
    // message to criterion costs a copy of it (wider loads than the
    // stores that wrote it) that is no part of parsing.
    g.bench_function("parse", |b| {
        b.iter(|| parse_with(black_box(&buf), &crc).is_ok())
    });
    for (name, crc) in [("emit+parse", crc), ("emit+parse_builtin", Crc32c::BUILTIN)] {
        let crc = black_box(crc);
        g.bench_function(name, |b| {
            b.iter(|| {
                let n = black_box(&msg)
                    .emit_with(black_box(&mut buf), &crc)
                    .unwrap_or(0);
                black_box(parse_with(black_box(&buf[..n]), &crc).is_ok())
            })
        });
    }
    g.finish();
}

/// Payload CRC through the wire: parsing a validated `Write` of each size
/// (the CRC dominates past a few hundred bytes), with the default provider.
fn payload_crc(c: &mut Criterion) {
    let mut g = c.benchmark_group("payload_crc");
    let crc = iomsg_ucx::crc32c_provider();
    for size in [64usize, 4096, 65536] {
        let data: Vec<u8> = (0..size).map(|i| (i * 131 % 251) as u8).collect();
        let msg = IoMsg {
            validate: true,
            body: Body::Write { data: &data },
            ..ack()
        };
        let mut frame = vec![0u8; msg.buffer_len()];
        let _ = msg.emit_with(&mut frame, &crc);
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_function(format!("parse_validated_write_{size}"), |b| {
            b.iter(|| parse_with(black_box(&frame), &crc).is_ok())
        });
    }
    g.finish();
}

fn tracker(c: &mut Criterion) {
    let mut g = c.benchmark_group("tracker");
    g.throughput(Throughput::Elements(1));
    g.bench_function("in_order", |b| {
        let mut t = DefaultTracker::default();
        let mut sn = 0u64;
        b.iter(|| {
            let v = t.check(black_box(sn));
            t.commit(sn, |_| {});
            sn += 1;
            v
        })
    });
    g.bench_function("one_percent_loss", |b| {
        let mut t = DefaultTracker::default();
        let mut sn = 0u64;
        b.iter(|| {
            if sn % 100 == 99 {
                sn += 1;
            }
            let v = t.check(black_box(sn));
            t.commit(sn, |_| {});
            sn += 1;
            v
        })
    });
    g.finish();
    // A whole window's worth per iteration: throughput counts its sns.
    let mut g = c.benchmark_group("tracker");
    g.throughput(Throughput::Elements(1024));
    g.bench_function("random_within_window", |b| {
        let mut rng = SplitMix64::new(1);
        b.iter_batched(
            || {
                // A window's worth of sns in a random order.
                let mut sns: Vec<u64> = (0..1024).collect();
                for i in (1..sns.len()).rev() {
                    let j = rng.below(i as u64 + 1) as usize;
                    sns.swap(i, j);
                }
                (DefaultTracker::default(), sns)
            },
            |(mut t, sns)| {
                for sn in sns {
                    black_box(t.check(sn));
                    t.commit(sn, |_| {});
                }
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
    let mut g = c.benchmark_group("tracker");
    g.throughput(Throughput::Elements(1));
    g.bench_function("duplicates", |b| {
        let mut t = DefaultTracker::default();
        for sn in 0..1024 {
            t.commit(sn, |_| {});
        }
        let mut sn = 0u64;
        b.iter(|| {
            sn = (sn + 1) % 1024;
            t.check(black_box(sn))
        })
    });
    g.finish();
}

fn send_window(c: &mut Criterion) {
    let mut g = c.benchmark_group("send_window");
    g.throughput(Throughput::Elements(1));
    g.bench_function("push_and_ack_with_64_byte_payloads", |b| {
        let mut window: SendWindow<u64, 1024> = SendWindow::new(0);
        let mut ring = PayloadRing::new(vec![0u8; 1024 * 64]);
        let payload = [7u8; 64];
        b.iter(|| {
            let Ok((pos, buf)) = ring.alloc(64) else {
                return;
            };
            buf.copy_from_slice(black_box(&payload));
            let Ok(sn) = window.push(pos) else { return };
            // Acknowledged at once: the window and its bytes are released.
            let _ = window.release(sn + 1);
            ring.release_to(ring.head());
        })
    });
    g.finish();
}

criterion_group!(benches, header, payload_crc, tracker, send_window);
criterion_main!(benches);

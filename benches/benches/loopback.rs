//! The full protocol over the loopback backend, one thread: acknowledged
//! io_msgs per second at each payload size, with the CRC32C provider the
//! library's users get by default (iomsg-ucx's run-time detected
//! instruction).

// criterion_group! makes an undocumented public function.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use iomsg_benches::Pair;

fn full_protocol(c: &mut Criterion) {
    let mut g = c.benchmark_group("loopback_full_protocol");
    for size in [64usize, 256, 4096, 65536] {
        let batch = if size >= 65536 { 100 } else { 1000 };
        g.throughput(Throughput::Elements(batch));
        let mut pair = Pair::with_crc(size, iomsg_ucx::crc32c_provider());
        g.bench_function(format!("io_msgs_{size}B"), |b| b.iter(|| pair.run(batch)));
        assert!(pair.taken() > 0, "no message reached the server");
    }
    // The server journal's share in the core: a record per changed
    // session and flush, handed to an application that only counts it.
    for size in [64usize, 4096] {
        g.throughput(Throughput::Elements(1000));
        let mut pair = Pair::with_journal(size, iomsg_ucx::crc32c_provider());
        g.bench_function(format!("io_msgs_{size}B_journal"), |b| {
            b.iter(|| pair.run(1000))
        });
        assert!(
            pair.journal_bytes() > 0,
            "no journal record was handed over"
        );
    }
    g.finish();
}

criterion_group!(benches, full_protocol);
criterion_main!(benches);

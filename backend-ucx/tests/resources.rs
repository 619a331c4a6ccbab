//! The transports UCX lists here, checked for what every Linux machine
//! has (`tcp` on `lo`, `self`) and against `ucx_info -d`, UCX's own
//! listing of the same query, when that tool is installed.

use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::process::Command;

use iomsg_ucx::resources::{transports, Resource};
use iomsg_ucx::version::ucx_version;

fn listed() -> Vec<Resource> {
    transports().unwrap_or_else(|status| panic!("transports() failed: {status}"))
}

fn has(list: &[Resource], transport: &str, device: Option<&str>) -> bool {
    list.iter()
        .any(|r| r.transport == transport && device.is_none_or(|d| r.device == d))
}

#[test]
fn the_list_is_non_empty_sorted_and_without_duplicates() {
    let list = listed();
    assert!(!list.is_empty(), "UCT listed no transport resource");
    for pair in list.windows(2) {
        assert!(pair[0] < pair[1], "out of order or repeated: {pair:?}");
    }
    for r in &list {
        assert!(
            !r.transport.is_empty() && !r.device.is_empty() && !r.component.is_empty(),
            "a resource with an empty name: {r:?}"
        );
    }
}

#[test]
fn tcp_on_loopback_and_self_are_listed() {
    let list = listed();
    assert!(has(&list, "tcp", Some("lo")), "no tcp on lo in {list:#?}");
    assert!(has(&list, "self", None), "no self transport in {list:#?}");
}

/// What `ucx_info -d` prints: (transport, device) pairs, and the component
/// of the memory domain each was printed under, if it printed one.
#[derive(Debug, Default)]
struct UcxInfo {
    version: Option<String>,
    pairs: BTreeSet<(String, String)>,
    with_component: BTreeSet<(String, String, String)>,
}

/// Parses the `Version`, `Memory domain`, `Component`, `Transport` and
/// `Device` lines of `ucx_info -v -d`; a `Device` line belongs to the
/// last `Transport` line above it.
fn parse_ucx_info(text: &str) -> UcxInfo {
    let mut info = UcxInfo::default();
    let mut component: Option<String> = None;
    let mut transport: Option<String> = None;
    for line in text.lines() {
        let line = line.trim_start_matches('#').trim();
        let Some((key, value)) = line.split_once(':') else {
            if let Some(v) = line.strip_prefix("Version ") {
                info.version = Some(v.trim().to_owned());
            }
            continue;
        };
        let value = value.trim().to_owned();
        match key.trim() {
            "Memory domain" => {
                component = None;
                transport = None;
            }
            "Component" => component = Some(value),
            "Transport" => transport = Some(value),
            "Device" => {
                let Some(t) = transport.clone() else {
                    panic!("ucx_info printed a device before any transport: {line:?}");
                };
                if let Some(c) = &component {
                    info.with_component
                        .insert((t.clone(), value.clone(), c.clone()));
                }
                info.pairs.insert((t, value));
            }
            _ => {}
        }
    }
    info
}

#[test]
fn ucx_info_parser_pairs_devices_with_their_transport() {
    let text = "\
# Version 1.13.1
# Memory domain: tcp
#     Component: tcp
#      Transport: tcp
#         Device: lo
#      capabilities:
#            bandwidth: 11.91/ppn + 0.00 MB/sec
#      Transport: tcp
#         Device: eth0
# Connection manager: tcp
# Memory domain: self
#     Component: self
#      Transport: self
#         Device: memory0
";
    let info = parse_ucx_info(text);
    assert_eq!(info.version.as_deref(), Some("1.13.1"));
    let pair = |t: &str, d: &str| (t.to_owned(), d.to_owned());
    assert_eq!(
        info.pairs,
        BTreeSet::from([
            pair("self", "memory0"),
            pair("tcp", "eth0"),
            pair("tcp", "lo")
        ])
    );
    assert!(info.with_component.contains(&(
        "self".to_owned(),
        "memory0".to_owned(),
        "self".to_owned()
    )));
    assert_eq!(info.with_component.len(), 3);
}

#[test]
fn the_list_agrees_with_ucx_info() {
    let output = match Command::new("ucx_info").args(["-v", "-d"]).output() {
        Ok(output) => output,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            println!(
                "skipped the comparison with ucx_info: no ucx_info binary on PATH \
                 (install ucx-utils, or the UCX build's bin/, to run it)"
            );
            return;
        }
        Err(e) => panic!("could not run ucx_info -v -d: {e}"),
    };
    assert!(
        output.status.success(),
        "ucx_info -v -d failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let info = parse_ucx_info(&String::from_utf8_lossy(&output.stdout));

    let loaded = ucx_version();
    match &info.version {
        Some(v) if *v == loaded.number() => {}
        other => {
            println!(
                "skipped the comparison with ucx_info: it runs UCX {other:?}, this \
                 process {loaded} (put the matching UCX's bin/ first on PATH to run it)"
            );
            return;
        }
    }

    let list = listed();
    let ours: BTreeSet<(String, String)> = list
        .iter()
        .map(|r| (r.transport.clone(), r.device.clone()))
        .collect();
    assert!(!info.pairs.is_empty(), "parsed no device from ucx_info -d");
    assert_eq!(
        ours, info.pairs,
        "transports() and ucx_info -d list different (transport, device) pairs"
    );
    for (transport, device, component) in &info.with_component {
        assert!(
            list.iter()
                .any(|r| (&r.transport, &r.device, &r.component) == (transport, device, component)),
            "ucx_info -d lists {transport} on {device} under component {component}; \
             transports() has {list:#?}"
        );
    }
}

//! The timeline picture's tests.

#![allow(clippy::unwrap_used)]

use super::*;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A file under the temp directory, removed when dropped (also when
/// the test fails).
struct TempSvg(PathBuf);

impl TempSvg {
    fn new(name: &str) -> Self {
        Self(
            std::env::temp_dir().join(format!("iomsg-plot-test-{}-{name}.svg", std::process::id())),
        )
    }
}

impl Drop for TempSvg {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A 60 s soak: 2 clients at 1 Hz, the server killed 10 times and
/// listening again 0.8 s later, each client's rate at 0 for the
/// second after a kill, client 2's link cut from 37 s to 40 s and
/// client 1 losing 3 sns at 26.3 s, as it reconnected.
fn realistic() -> Timeline {
    let kills: Vec<f64> = (0..10).map(|i| 4.0 + 5.3 * f64::from(i)).collect();
    let restarts: Vec<f64> = kills.iter().map(|k| k + 0.8).collect();
    let cut = Cut {
        client: 1,
        from: 37.0,
        to: 40.0,
    };
    let clients = (0..2)
        .map(|c| {
            let base = [182_000.0, 151_000.0][c];
            let reconnects: Vec<f64> = kills
                .iter()
                .map(|k| k + 1.1 + 0.15 * c as f64)
                .chain((c == 1).then_some(cut.to + 0.4))
                .collect();
            let rate = (1..=60)
                .map(|s| {
                    let t = f64::from(s);
                    let down = kills.iter().any(|&k| t > k && t <= k + 1.5)
                        || (c == 1 && t > cut.from && t <= cut.to + 0.5);
                    // Some deterministic wobble.
                    let wobble = ((t * 1.7 + c as f64).sin() * 0.06 + 1.0) * base;
                    (t, if down { 0.0 } else { wobble })
                })
                .collect();
            ClientSeries {
                name: format!("client {}", c + 1),
                rate,
                reconnects,
                losses: if c == 0 { vec![(26.3, 3)] } else { vec![] },
            }
        })
        .collect();
    Timeline {
        title: "soak 60 s: FAIL, 3 sns lost, 10 kills, 21 reconnects <2 clients & 1 cut>".into(),
        seconds: 60.0,
        clients,
        kills,
        restarts,
        cuts: vec![cut],
    }
}

/// Checks that the tags nest and close, that the root is `<svg>`,
/// that there is no stray `&` and returns the tags' texts (without
/// the angle brackets).
fn well_formed(svg: &str) -> Vec<&str> {
    let mut stack = Vec::new();
    let mut tags = Vec::new();
    let mut rest = svg.trim();
    let mut roots = 0;
    while let Some(open) = rest.find('<') {
        let text = &rest[..open];
        assert!(!text.contains('>'), "stray '>' in {text:?}");
        for (i, _) in text.match_indices('&') {
            let entity = &text[i..];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;", "&#"]
                    .iter()
                    .any(|e| entity.starts_with(e)),
                "bare & in {text:?}"
            );
        }
        let close = rest[open..].find('>').expect("unclosed tag") + open;
        let tag = &rest[open + 1..close];
        assert!(!tag.contains('<'), "'<' inside tag {tag:?}");
        assert_eq!(
            tag.matches('"').count() % 2,
            0,
            "unbalanced quotes: {tag:?}"
        );
        tags.push(tag);
        if tag.starts_with('?') || tag.starts_with('!') {
            // Declaration or comment.
        } else if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop(), Some(name.trim()), "mismatched </{name}>");
        } else {
            let name = tag.split_whitespace().next().unwrap().trim_end_matches('/');
            if stack.is_empty() {
                assert_eq!(name, "svg", "root is not <svg>");
                roots += 1;
            }
            if !tag.ends_with('/') {
                stack.push(name);
            }
        }
        rest = &rest[close + 1..];
    }
    assert!(rest.trim().is_empty(), "text after the root: {rest:?}");
    assert!(stack.is_empty(), "unclosed: {stack:?}");
    assert_eq!(roots, 1);
    tags
}

#[test]
fn the_checker_checks() {
    for bad in [
        "<svg><g></svg>",
        "<svg></g></svg>",
        "<g></g>",
        "<svg/><svg/>",
        "<svg><text>a & b</text></svg>",
        "<svg x=\"1></svg>",
        "<svg>",
    ] {
        assert!(
            std::panic::catch_unwind(|| well_formed(bad)).is_err(),
            "{bad}"
        );
    }
    assert_eq!(
        well_formed("<svg a=\"1\"><g/><text>&amp;</text></svg>").len(),
        5
    );
}

/// The contents of the `<text>` elements, trimmed.
fn texts(svg: &str) -> Vec<&str> {
    svg.split("<text ")
        .skip(1)
        .map(|t| {
            let start = t.find('>').unwrap() + 1;
            t[start..t.find("</text>").unwrap()].trim()
        })
        .collect()
}

/// The value of attribute `name` in `tag`.
fn attr<'t>(tag: &'t str, name: &str) -> Option<&'t str> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    Some(&tag[start..start + tag[start..].find('"')?])
}

/// The points of a polyline tag.
fn points(tag: &str) -> Vec<(f64, f64)> {
    attr(tag, "points")
        .unwrap()
        .split_whitespace()
        .map(|p| {
            let (x, y) = p.split_once(',').unwrap();
            (x.parse().unwrap(), y.parse().unwrap())
        })
        .collect()
}

fn write_and_read(timeline: &Timeline, name: &str) -> (TempSvg, String) {
    let file = TempSvg::new(name);
    write_svg(timeline, &file.0).unwrap();
    let svg = std::fs::read_to_string(&file.0).unwrap();
    well_formed(&svg);
    (file, svg)
}

#[test]
fn realistic_timeline() {
    let timeline = realistic();
    let (file, svg) = write_and_read(&timeline, "realistic");
    let tags = well_formed(&svg);
    assert!(attr(tags[0], "width") == Some("1200") && attr(tags[0], "height") == Some("500"));

    // The title (escaped), the axes, the legend.
    let texts = texts(&svg);
    for text in [
        "soak 60 s: FAIL, 3 sns lost, 10 kills, 21 reconnects &lt;2 clients &amp; 1 cut&gt;",
        "seconds since start",
        "acknowledged msgs/s",
        "client 1",
        "client 2",
        "server killed",
        "server listening again",
        "reconnected",
        "link cut (client 2)",
        "3 sns lost (client 1)",
        "sns lost (3 in all)",
        // SI tick labels.
        "100k",
    ] {
        assert!(texts.contains(&text), "no {text} in {texts:?}");
    }
    assert!(!svg.contains("no sn lost"));

    // One dashed, full-height red line per kill, each at a different
    // x, plus the legend's short one: each a column of vertical dashes of
    // KILL_DASH pixels at most, KILL_GAP apart.
    let mut columns: BTreeMap<i64, Vec<(f64, f64)>> = BTreeMap::new();
    for t in tags
        .iter()
        .filter(|t| t.starts_with("polyline") && t.contains("stroke=\"#DC1E1E\""))
    {
        let p = points(t);
        let (top, bottom) = (p[0], p[p.len() - 1]);
        assert!(p.iter().all(|q| q.0 == top.0), "not vertical: {t}");
        let len = (bottom.1 - top.1).abs();
        assert!(len > 0.0 && len <= f64::from(KILL_DASH) + 1.0, "{t}");
        columns
            .entry(top.0 as i64)
            .or_default()
            .push((top.1.min(bottom.1), top.1.max(bottom.1)));
    }
    assert_eq!(columns.len(), timeline.kills.len() + 1, "{columns:?}");
    for dashes in columns.values_mut() {
        dashes.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert!(dashes.len() >= 2, "{dashes:?}");
        for w in dashes.windows(2) {
            let gap = w[1].0 - w[0].1;
            assert!((gap - f64::from(KILL_GAP)).abs() <= 1.0, "{dashes:?}");
        }
    }
    let tall: Vec<f64> = columns
        .iter()
        .filter(|(_, d)| d[d.len() - 1].1 - d[0].0 > 300.0)
        .map(|(&x, _)| x as f64)
        .collect();
    assert_eq!(tall.len(), timeline.kills.len());
    assert!(tall.windows(2).all(|w| w[1] - w[0] > 50.0), "{tall:?}");
    // Kills at 4 s and 51.7 s of 60 on a ~1100 px chart.
    assert!(tall[tall.len() - 1] - tall[0] > 700.0, "{tall:?}");

    // Restart lines in green, one per restart.
    let green = tags
        .iter()
        .filter(|t| t.starts_with("polyline") && t.contains("stroke=\"#00963C\""))
        .count();
    assert_eq!(green, timeline.restarts.len() + 1);
    // Reconnect dots in the clients' colours.
    for (c, colour) in [(0, "#1F77B4"), (1, "#FF7F0E")] {
        let dots = tags
            .iter()
            .filter(|t| t.starts_with("circle") && t.contains(&format!("fill=\"{colour}\"")))
            .count();
        assert_eq!(dots, timeline.clients[c].reconnects.len());
    }
    // The cut's band is translucent.
    assert!(tags
        .iter()
        .any(|t| t.starts_with("rect") && attr(t, "opacity") == Some("0.16")));
    drop(file);
}

#[test]
fn no_losses_says_so() {
    let mut timeline = realistic();
    for c in &mut timeline.clients {
        c.losses.clear();
    }
    let (_file, svg) = write_and_read(&timeline, "no-losses");
    assert!(texts(&svg).contains(&"no sn lost"));
    assert!(!svg.contains(" lost ("));
}

#[test]
fn degenerate_timelines() {
    let many = Timeline {
        title: "x".repeat(500),
        seconds: 3.0,
        clients: (0..40)
            .map(|i| ClientSeries {
                name: format!("client {i}"),
                rate: vec![(0.0, 1.0), (1.0, 2.0)],
                ..ClientSeries::default()
            })
            .collect(),
        ..Timeline::default()
    };
    let weird = Timeline {
        title: "line one\n\nline two\nline three\nline four\nline five\nline six".into(),
        seconds: f64::NAN,
        clients: vec![
            ClientSeries {
                name: String::new(),
                rate: vec![
                    (f64::NAN, 5.0),
                    (1.0, f64::INFINITY),
                    (2.0, -3.0),
                    (-1.0, 4.0),
                    (3.0, f64::MAX),
                ],
                reconnects: vec![f64::NEG_INFINITY, 2.5, 1e300],
                losses: vec![(f64::NAN, 1), (2.0, u64::MAX), (2.1, u64::MAX)],
            },
            ClientSeries {
                name: "one sample".into(),
                rate: vec![(1.0, 1.0)],
                ..ClientSeries::default()
            },
        ],
        kills: vec![f64::NAN, -1.0, 0.0, f64::INFINITY],
        restarts: vec![f64::MAX],
        cuts: vec![
            Cut {
                client: 99,
                from: 5.0,
                to: 1.0,
            },
            Cut {
                client: usize::MAX,
                from: f64::NAN,
                to: 1.0,
            },
            Cut {
                client: 0,
                from: 2.0,
                to: f64::INFINITY,
            },
        ],
    };
    let cases = [
        ("default", Timeline::default()),
        (
            "zero-seconds",
            Timeline {
                title: "zero".into(),
                seconds: 0.0,
                clients: vec![ClientSeries::default(), ClientSeries::default()],
                ..Timeline::default()
            },
        ),
        (
            "tiny",
            Timeline {
                seconds: 1e-9,
                clients: vec![ClientSeries {
                    rate: vec![(0.0, 1e-300), (1e-9, 0.0)],
                    ..ClientSeries::default()
                }],
                ..Timeline::default()
            },
        ),
        (
            "huge",
            Timeline {
                seconds: 1e12,
                clients: vec![ClientSeries {
                    rate: vec![(0.0, 1e18), (1e12, 2e18)],
                    reconnects: vec![5e11],
                    losses: vec![(6e11, 1)],
                    ..ClientSeries::default()
                }],
                kills: vec![1e11],
                ..Timeline::default()
            },
        ),
        ("many-clients", many),
        ("weird", weird),
    ];
    for (name, timeline) in cases {
        let (_file, svg) = write_and_read(&timeline, name);
        assert!(svg.contains("acknowledged msgs/s"), "{name}");
        // 40 clients do not fit: the legend says how many it left out.
        assert_eq!(svg.contains("more clients)"), name == "many-clients");
    }
}

#[test]
fn write_errors_name_the_file() {
    let path = std::env::temp_dir()
        .join(format!(
            "iomsg-plot-test-{}-no-such-dir",
            std::process::id()
        ))
        .join("t.svg");
    let err = write_svg(&realistic(), &path).unwrap_err();
    assert!(err.contains("cannot write"), "{err}");
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert!(!path.exists());
}

#[test]
fn tick_labels() {
    let cases = [
        (0.0, "0"),
        (950.0, "950"),
        (1500.0, "1.5k"),
        (120_000.0, "120k"),
        (1_200_000.0, "1.2M"),
        (2.5e9, "2.5G"),
        (0.25, "0.25"),
    ];
    for (v, s) in cases {
        assert_eq!(si(v), s);
    }
    assert_eq!(secs(12.5), "12.5");
    assert_eq!(secs(60.0), "60");
    assert_eq!(rate_at(&[(0.0, 0.0), (2.0, 10.0)], 1.0), 5.0);
    assert_eq!(rate_at(&[(1.0, 3.0)], 9.0), 3.0);
    assert_eq!(rate_at(&[], 9.0), 0.0);
}

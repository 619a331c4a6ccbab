//! The soak's timeline picture: throughput per client over time, with the
//! server's kills, its restarts, the clients' reconnects, link cuts and
//! any losses marked.

use std::error::Error;
use std::path::Path;

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::element::{ComposedElement, DashedPathElement};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// What the picture shows. Times are seconds since the soak started.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    /// The title line (e.g. the verdict and the main figures).
    pub title: String,
    /// The length of the run.
    pub seconds: f64,
    /// One series per client.
    pub clients: Vec<ClientSeries>,
    /// When the server was SIGKILLed.
    pub kills: Vec<f64>,
    /// When a restarted server listened again.
    pub restarts: Vec<f64>,
    /// Client links taken down: which client, from, to.
    pub cuts: Vec<Cut>,
}

/// One client's throughput and events.
#[derive(Clone, Debug, Default)]
pub struct ClientSeries {
    /// Its name in the legend ("client 1").
    pub name: String,
    /// (time, acknowledged messages per second) samples, in time order.
    pub rate: Vec<(f64, f64)>,
    /// When it reconnected (its first acknowledgement from a new
    /// connection).
    pub reconnects: Vec<f64>,
    /// (time, sns lost) for every loss it saw.
    pub losses: Vec<(f64, u64)>,
}

/// A client's link taken down for a while.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cut {
    /// The client's index in [`Timeline::clients`].
    pub client: usize,
    /// Down from.
    pub from: f64,
    /// Up again.
    pub to: f64,
}

/// The picture's size in pixels.
const WIDTH: u32 = 1200;
const HEIGHT: u32 = 500;
/// The legend's column on the right, beside the chart rather than on it.
const LEGEND_WIDTH: u32 = 215;
const FONT: &str = "sans-serif";

/// The kill lines' colour; they are dashed ([`KILL_DASH`] long,
/// [`KILL_GAP`] apart), drawn by plotters' dashed path element.
const KILL: RGBColor = RGBColor(220, 30, 30);
/// A kill line's dash length, in pixels.
const KILL_DASH: i32 = 7;
/// The gap between two dashes of a kill line, in pixels.
const KILL_GAP: i32 = 4;
const RESTART: RGBColor = RGBColor(0, 150, 60);
const LOSS: RGBColor = RGBColor(0, 0, 0);
const CUT_FILL: RGBAColor = RGBAColor(110, 110, 110, 0.16);
const GRID: RGBColor = RGBColor(225, 225, 225);
/// Client colours: tab10 without its red and green, which mean kill and
/// restart here.
const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(23, 190, 207),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
    RGBColor(127, 127, 127),
];

/// Draws `timeline` as an SVG file at `path`.
///
/// # Errors
///
/// The file could not be written.
pub fn write_svg(timeline: &Timeline, path: &Path) -> Result<(), String> {
    let svg = render(timeline).map_err(|e| format!("cannot draw the timeline picture: {e}"))?;
    std::fs::write(path, svg).map_err(|e| {
        format!(
            "cannot write the timeline picture to {}: {e}",
            path.display()
        )
    })
}

/// The SVG text of the picture.
fn render(timeline: &Timeline) -> Result<String, Box<dyn Error>> {
    let data = Prepared::new(timeline);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        draw(&root, &data)?;
        root.present()?;
    }
    Ok(svg)
}

/// One client, cleaned up for drawing.
struct Client {
    name: String,
    colour: RGBColor,
    rate: Vec<(f64, f64)>,
    reconnects: Vec<f64>,
    losses: Vec<(f64, u64)>,
}

/// The timeline with everything not drawable (NaN, infinities, negative
/// times or rates, rates beyond 1e300) dropped or clamped, and the axes'
/// ranges.
struct Prepared {
    title: Vec<String>,
    x_max: f64,
    y_max: f64,
    clients: Vec<Client>,
    kills: Vec<f64>,
    restarts: Vec<f64>,
    /// (label, from, to).
    cuts: Vec<(String, f64, f64)>,
    lost: u64,
}

/// `t` if it is a time that can be drawn.
fn time(t: f64) -> Option<f64> {
    (t.is_finite() && t >= 0.0).then_some(t)
}

impl Prepared {
    fn new(timeline: &Timeline) -> Self {
        let clients = Self::clients(timeline);
        let kills: Vec<f64> = timeline.kills.iter().filter_map(|&t| time(t)).collect();
        let restarts: Vec<f64> = timeline.restarts.iter().filter_map(|&t| time(t)).collect();
        let x_max = Self::x_max(timeline, &clients, &kills, &restarts);
        let cuts = Self::cuts(timeline, &clients, x_max);
        // Headroom above the highest rate for the loss and cut labels.
        let top = clients
            .iter()
            .flat_map(|c| c.rate.iter().map(|p| p.1))
            .fold(0.0, f64::max);
        let y_max = if top > 0.0 { top * 1.2 } else { 1.0 };

        let lost = clients
            .iter()
            .flat_map(|c| c.losses.iter().map(|l| l.1))
            .fold(0u64, u64::saturating_add);
        let title = timeline
            .title
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
        Self {
            title,
            x_max,
            y_max,
            clients,
            kills,
            restarts,
            cuts,
            lost,
        }
    }
}

impl Prepared {
    /// Each client's name, colour, rate samples, reconnects and losses,
    /// at valid times.
    fn clients(timeline: &Timeline) -> Vec<Client> {
        timeline
            .clients
            .iter()
            .enumerate()
            .map(|(i, c)| Client {
                name: if c.name.trim().is_empty() {
                    format!("client {}", i + 1)
                } else {
                    c.name.clone()
                },
                colour: PALETTE[i % PALETTE.len()],
                rate: c
                    .rate
                    .iter()
                    .filter(|p| p.1.is_finite())
                    // Clamped so that the headroom above stays finite.
                    .filter_map(|&(t, v)| Some((time(t)?, v.clamp(0.0, 1e300))))
                    .collect(),
                reconnects: c.reconnects.iter().filter_map(|&t| time(t)).collect(),
                losses: c
                    .losses
                    .iter()
                    .filter(|l| l.1 > 0)
                    .filter_map(|&(t, n)| Some((time(t)?, n)))
                    .collect(),
            })
            .collect()
    }

    /// The end of the x axis: the end of the run, or later if something
    /// happened later (1 s for an empty run).
    fn x_max(timeline: &Timeline, clients: &[Client], kills: &[f64], restarts: &[f64]) -> f64 {
        let mut x_max = time(timeline.seconds).unwrap_or(0.0);
        let times = clients
            .iter()
            .flat_map(|c| {
                c.rate
                    .iter()
                    .map(|p| p.0)
                    .chain(c.reconnects.iter().copied())
                    .chain(c.losses.iter().map(|l| l.0))
            })
            .chain(kills.iter().copied())
            .chain(restarts.iter().copied())
            .chain(
                timeline
                    .cuts
                    .iter()
                    .flat_map(|c| [c.from, c.to])
                    .filter_map(time),
            );
        for t in times {
            x_max = x_max.max(t);
        }
        if x_max <= 0.0 {
            x_max = 1.0;
        }
        x_max
    }

    /// The link cuts as named bands within the x axis.
    fn cuts(timeline: &Timeline, clients: &[Client], x_max: f64) -> Vec<(String, f64, f64)> {
        timeline
            .cuts
            .iter()
            .filter(|c| !c.from.is_nan() && !c.to.is_nan())
            .map(|c| {
                let (a, b) = (c.from.min(c.to), c.from.max(c.to));
                let name = clients
                    .get(c.client)
                    .map_or_else(|| format!("client {}", c.client + 1), |k| k.name.clone());
                (
                    format!("link cut ({name})"),
                    a.clamp(0.0, x_max),
                    b.clamp(0.0, x_max),
                )
            })
            .collect()
    }
}

/// The client's rate at `t`, interpolated between its samples (0 with
/// none), so that its markers sit on its line.
fn rate_at(rate: &[(f64, f64)], t: f64) -> f64 {
    let i = rate.partition_point(|p| p.0 < t);
    match (i.checked_sub(1).and_then(|j| rate.get(j)), rate.get(i)) {
        (Some(&(t0, v0)), Some(&(t1, v1))) if t1 > t0 => v0 + (v1 - v0) * ((t - t0) / (t1 - t0)),
        (_, Some(&(_, v))) | (Some(&(_, v)), None) => v,
        (None, None) => 0.0,
    }
}

/// Strips trailing zeros from a fixed-point number.
fn trim(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

/// `v` as "950", "120k", "1.2M".
fn si(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() || a >= 1e15 {
        return format!("{v:.1e}");
    }
    let (scaled, suffix) = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
        .into_iter()
        .find(|&(unit, _)| a >= unit)
        .map_or((v, ""), |(unit, suffix)| (v / unit, suffix));
    let digits = if scaled.abs() >= 100.0 || scaled == 0.0 {
        0
    } else if scaled.abs() >= 1.0 {
        2
    } else {
        3
    };
    format!("{}{suffix}", trim(format!("{scaled:.digits$}")))
}

/// Seconds as "0", "12.5", "3600".
fn secs(v: f64) -> String {
    if v.is_finite() && v.abs() < 1e7 {
        trim(format!("{v:.2}"))
    } else {
        format!("{v:.1e}")
    }
}

fn text_style(size: f64, colour: RGBColor, h: HPos, v: VPos) -> TextStyle<'static> {
    (FONT, size).into_font().color(&colour).pos(Pos::new(h, v))
}

fn bold_style(size: f64, colour: RGBColor, h: HPos, v: VPos) -> TextStyle<'static> {
    (FONT, size)
        .into_font()
        .style(FontStyle::Bold)
        .color(&colour)
        .pos(Pos::new(h, v))
}

/// A reconnect marker: a dot with a white ring, to stand out on its line.
fn dot<C, DB: DrawingBackend>(at: C, colour: RGBColor) -> Dot<C, DB> {
    EmptyElement::at(at)
        + Circle::new((0, 0), 5, WHITE.filled())
        + Circle::new((0, 0), 4, colour.filled())
}

type Dot<C, DB> = ComposedElement<C, DB, Circle<(i32, i32), i32>, Circle<(i32, i32), i32>>;

/// The width in pixels of the patch under `text`.
fn label_width(text: &str, style: &TextStyle<'_>) -> i32 {
    // About 0.6 em per character; plotters writes font-size = size / 1.24.
    let em = style.font.get_size() / 1.24;
    (em * 0.6 * text.chars().count() as f64 + 8.0).min(f64::from(WIDTH)) as i32
}

/// `text` on a translucent white patch, `offset` pixels from `at`: the
/// patch's vertical middle there, and its left, middle or right by `h`.
fn patch<C, DB: DrawingBackend>(
    at: C,
    offset: (i32, i32),
    h: HPos,
    text: String,
    style: TextStyle<'static>,
) -> Patch<C, DB> {
    let w = label_width(&text, &style);
    let half_height = (style.font.get_size() / 1.24 * 0.65 + 2.0) as i32;
    let (dx, dy) = offset;
    let left = match h {
        HPos::Left => dx,
        HPos::Center => dx - w / 2,
        HPos::Right => dx - w,
    };
    EmptyElement::at(at)
        + Rectangle::new(
            [(left, dy - half_height), (left + w, dy + half_height)],
            WHITE.mix(0.7).filled(),
        )
        + Text::new(text, (left + w / 2, dy), style)
}

type Patch<C, DB> =
    ComposedElement<C, DB, Rectangle<(i32, i32)>, Text<'static, (i32, i32), String>>;

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

fn draw(root: &Area<'_>, data: &Prepared) -> Result<(), Box<dyn Error>> {
    let rest = draw_title(root, data)?;
    let (chart_area, legend_area) = rest.split_horizontally(WIDTH - LEGEND_WIDTH);
    let mut chart = ChartBuilder::on(&chart_area)
        .margin_top(8)
        .margin_left(8)
        .margin_right(12)
        .margin_bottom(6)
        .x_label_area_size(46)
        .y_label_area_size(78)
        .build_cartesian_2d(0.0..data.x_max, 0.0..data.y_max)?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .bold_line_style(GRID)
        .x_labels(16)
        .y_labels(8)
        .x_desc("seconds since start")
        .y_desc("acknowledged msgs/s")
        .axis_desc_style((FONT, 17))
        .label_style((FONT, 15))
        .x_label_formatter(&|v| secs(*v))
        .y_label_formatter(&|v| si(*v))
        .draw()?;

    draw_marks(&mut chart, data)?;
    draw_rates(&mut chart, data)?;
    draw_labels(&mut chart, data)?;
    draw_legend(&legend_area, data)?;
    Ok(())
}

/// The chart: seconds across, acknowledged messages per second up.
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The title at the top; returns the area below it.
fn draw_title<'a>(root: &Area<'a>, data: &Prepared) -> Result<Area<'a>, Box<dyn Error>> {
    // The title, one or more lines, shrunk to fit at most a quarter of
    // the height and the width (and cut short if still too long).
    let room = f64::from(HEIGHT / 4 - 12);
    let longest = data.title.iter().map(|l| l.chars().count()).max();
    let title_size = longest.map_or(0.0, |longest| {
        // About 0.6 em per character in a bold sans-serif face; plotters
        // writes font-size = size / 1.24.
        let by_width = f64::from(WIDTH - 30) * 1.24 / (0.6 * longest as f64);
        let by_height = room / (0.95 * data.title.len() as f64);
        by_width.min(by_height).clamp(12.0, 24.0)
    });
    let line_height = (title_size * 0.95).ceil();
    let lines = if longest.is_some() {
        ((room / line_height) as usize).min(data.title.len())
    } else {
        0
    };
    // A line still too long at the smallest size is cut short, on the
    // safe side: wide letters take up to 0.7 em.
    let fits = |em_per_char: f64| {
        (f64::from(WIDTH - 30) * 1.24 / (em_per_char * title_size.max(1.0))) as usize
    };
    let (fit, cut_to) = (fits(0.6), fits(0.7));
    let title_height = (line_height * lines as f64) as u32 + 12;
    let (title_area, rest) = root.split_vertically(title_height);
    for (i, line) in data.title.iter().take(lines).enumerate() {
        let line = if line.chars().count() > fit {
            line.chars()
                .take(cut_to.saturating_sub(3))
                .chain("...".chars())
                .collect()
        } else {
            line.clone()
        };
        title_area.draw(&Text::new(
            line,
            ((WIDTH / 2) as i32, 8 + (i as f64 * line_height) as i32),
            bold_style(title_size, BLACK, HPos::Center, VPos::Top),
        ))?;
    }

    Ok(rest)
}

/// Behind the rates: the link cut bands, the restarts, the kills.
fn draw_marks(chart: &mut Chart<'_, '_>, data: &Prepared) -> Result<(), Box<dyn Error>> {
    let y_max = data.y_max;
    // Behind everything: the cut bands.
    chart.draw_series(
        data.cuts
            .iter()
            .map(|c| Rectangle::new([(c.1, 0.0), (c.2, y_max)], CUT_FILL.filled())),
    )?;
    // Restarts under kills: they usually follow within a second.
    chart.draw_series(
        data.restarts
            .iter()
            .map(|&t| PathElement::new(vec![(t, 0.0), (t, y_max)], RESTART.stroke_width(1))),
    )?;
    chart.draw_series(data.restarts.iter().map(|&t| {
        EmptyElement::at((t, 0.0)) + TriangleMarker::new((0, -4), 5, RESTART.filled())
    }))?;
    for &t in &data.kills {
        chart.draw_series(DashedLineSeries::new(
            [(t, 0.0), (t, y_max)],
            KILL_DASH,
            KILL_GAP,
            KILL.stroke_width(2),
        ))?;
    }
    Ok(())
}

/// Each client's rate, and a dot at each of its reconnects.
fn draw_rates(chart: &mut Chart<'_, '_>, data: &Prepared) -> Result<(), Box<dyn Error>> {
    for c in &data.clients {
        chart.draw_series(LineSeries::new(
            c.rate.iter().copied(),
            c.colour.stroke_width(2),
        ))?;
        if let [only] = c.rate.as_slice() {
            chart.draw_series(std::iter::once(Circle::new(*only, 3, c.colour.filled())))?;
        }
    }
    for c in &data.clients {
        chart.draw_series(
            c.reconnects
                .iter()
                .map(|&t| dot((t, rate_at(&c.rate, t)), c.colour)),
        )?;
    }
    Ok(())
}

/// Labels last, on top of the lines: the cut bands' names and the
/// losses.
fn draw_labels(chart: &mut Chart<'_, '_>, data: &Prepared) -> Result<(), Box<dyn Error>> {
    let (x_max, y_max) = (data.x_max, data.y_max);
    // Labels last, on top of the lines, on a white patch so that the
    // lines crossing them do not get in the way. Cut labels go in up to
    // three rows at the top, a label that fits in none is left out (its
    // band is still there).
    let cut_style = text_style(15.0, RGBColor(60, 60, 60), HPos::Center, VPos::Center);
    let mut cuts: Vec<_> = data.cuts.iter().collect();
    cuts.sort_by(|a, b| (a.1 + a.2).total_cmp(&(b.1 + b.2)));
    let mut rows = [i32::MIN; 3];
    for c in cuts {
        let middle = (c.1 + c.2) / 2.0;
        let w = label_width(&c.0, &cut_style);
        let left = chart.backend_coord(&(middle, y_max)).0 - w / 2;
        let Some(row) = rows
            .iter()
            .position(|&right| right.saturating_add(6) < left)
        else {
            continue;
        };
        rows[row] = left + w;
        chart.draw_series(std::iter::once(patch(
            (middle, y_max),
            (0, 14 + 22 * row as i32),
            HPos::Center,
            c.0.clone(),
            cut_style.clone(),
        )))?;
    }
    for c in &data.clients {
        for &(t, n) in &c.losses {
            let at = (t, rate_at(&c.rate, t));
            chart.draw_series(std::iter::once(Cross::new(at, 8, LOSS.stroke_width(3))))?;
            // Up and right of the mark, or left near the right edge.
            let (dx, h) = if t > x_max * 0.85 {
                (-8, HPos::Right)
            } else {
                (8, HPos::Left)
            };
            chart.draw_series(std::iter::once(patch(
                at,
                (dx, -18),
                h,
                format!(
                    "{n} {} lost ({})",
                    if n == 1 { "sn" } else { "sns" },
                    c.name
                ),
                bold_style(15.0, LOSS, HPos::Center, VPos::Center),
            )))?;
        }
    }
    Ok(())
}

/// The legend, in its own column right of the chart.
fn draw_legend(area: &Area<'_>, data: &Prepared) -> Result<(), Box<dyn Error>> {
    const ROW: i32 = 24;
    const GLYPH: i32 = 14;
    const TEXT_X: i32 = 44;
    let label = |s: &str, y: i32| {
        Text::new(
            s.to_owned(),
            (TEXT_X, y),
            text_style(15.0, BLACK, HPos::Left, VPos::Center),
        )
    };
    let (_, height) = area.dim_in_pixel();
    let height = i32::try_from(height).unwrap_or(i32::MAX);
    let mut y = 20;

    // The events first, then as many clients as fit.
    area.draw(&DashedPathElement::new(
        [(GLYPH + 10, y - 9), (GLYPH + 10, y + 9)],
        KILL_DASH,
        KILL_GAP,
        KILL.stroke_width(2),
    ))?;
    area.draw(&label("server killed", y))?;
    y += ROW;
    area.draw(&PathElement::new(
        vec![(GLYPH + 10, y - 9), (GLYPH + 10, y + 9)],
        RESTART.stroke_width(1),
    ))?;
    area.draw(
        &(EmptyElement::at((GLYPH + 10, y + 9))
            + TriangleMarker::new((0, -4), 5, RESTART.filled())),
    )?;
    area.draw(&label("server listening again", y))?;
    y += ROW;
    area.draw(&dot((GLYPH + 10, y), RGBColor(90, 90, 90)))?;
    area.draw(&label("reconnected", y))?;
    y += ROW;
    if !data.cuts.is_empty() {
        area.draw(&Rectangle::new(
            [(GLYPH, y - 8), (GLYPH + 20, y + 8)],
            CUT_FILL.filled(),
        ))?;
        area.draw(&label("link cut", y))?;
        y += ROW;
    }
    if data.lost > 0 {
        area.draw(&Cross::new((GLYPH + 10, y), 6, LOSS.stroke_width(3)))?;
        area.draw(&label(&format!("sns lost ({} in all)", data.lost), y))?;
        y += ROW;
    }
    y += ROW / 3;
    let bottom = height - if data.lost == 0 { 2 * ROW } else { ROW };
    for (i, c) in data.clients.iter().enumerate() {
        if y + ROW > bottom && i + 1 < data.clients.len() {
            area.draw(&label(
                &format!("(+{} more clients)", data.clients.len() - i),
                y,
            ))?;
            break;
        }
        area.draw(&PathElement::new(
            vec![(GLYPH, y), (GLYPH + 20, y)],
            c.colour.stroke_width(3),
        ))?;
        area.draw(&label(&c.name, y))?;
        y += ROW;
    }

    if data.lost == 0 {
        area.draw(&Text::new(
            "no sn lost",
            (GLYPH, height - 40),
            bold_style(20.0, RESTART, HPos::Left, VPos::Bottom),
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;

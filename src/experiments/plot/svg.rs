//! A small, deterministic SVG writer for the experiments' figures: line charts with error
//! bars and stacked bar charts, axes with round ticks, and a legend. The same data gives the
//! same bytes (numbers are printed with fixed decimals, nothing depends on fonts or time).

use std::fmt::Write;

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 470.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 90.0;
/// Colour-blind-safe palette (Okabe and Ito), cycled.
const COLOURS: [&str; 8] = [
    "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#f0e442", "#000000",
];

/// One line of a line chart: points (x, y, one-sigma error).
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub label: String,
    pub points: Vec<(f64, f64, f64)>,
}

/// One bar of a stacked chart: its category label and its segments' heights (one per
/// segment name).
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub label: String,
    pub segments: Vec<f64>,
}

/// Axis titles and the figure's title.
#[derive(Debug, Clone, PartialEq)]
pub struct Labels {
    pub title: String,
    pub x: String,
    pub y: String,
}

/// Round tick values covering `lo..=hi`: 1, 2 or 5 times a power of ten apart.
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = (hi - lo).max(f64::MIN_POSITIVE);
    let raw = span / 5.0;
    let power = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|s| span / s <= 6.0)
        .unwrap_or(10.0 * power);
    // The tolerance keeps 0.6 / 0.1 = 5.999... from adding a tick below the data.
    let first = (lo / step + 1e-9).floor() as i64;
    let last = (hi / step - 1e-9).ceil() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

/// A number as a tick label: short, exact for round values.
fn number(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    if !(1e-3..1e6).contains(&a) {
        return format!("{v:.1e}");
    }
    let text = format!("{v:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    text.to_owned()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The plotting area's mapping from data to pixels.
struct Frame {
    x: (f64, f64),
    y: (f64, f64),
}

impl Frame {
    fn px(&self, x: f64) -> f64 {
        let (lo, hi) = self.x;
        LEFT + (x - lo) / (hi - lo).max(f64::MIN_POSITIVE) * (WIDTH - LEFT - RIGHT)
    }

    fn py(&self, y: f64) -> f64 {
        let (lo, hi) = self.y;
        HEIGHT - BOTTOM - (y - lo) / (hi - lo).max(f64::MIN_POSITIVE) * (HEIGHT - TOP - BOTTOM)
    }
}

fn header(svg: &mut String, labels: &Labels) {
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        svg,
        r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#
    );
    // A long title (a refused count, repetitions) takes two smaller lines, centred on the
    // figure, instead of running off its edges.
    let lines = wrap(&labels.title, TITLE_CHARS);
    let (size, first_y, step) = match lines.len() {
        1 => (15, 22.0, 0.0),
        _ => (13, 16.0, 16.0),
    };
    for (i, line) in lines.iter().enumerate() {
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="{size}">{}</text>"#,
            WIDTH / 2.0,
            first_y + step * i as f64,
            escape(line)
        );
    }
}

/// Characters of a title line at 15 px that fit across the figure.
const TITLE_CHARS: usize = 80;

/// `text` in at most two lines of at most `width` characters: split at the space nearest
/// the middle that keeps the first line within `width` (else cut at `width`), the second
/// line cut short with an ellipsis if it is longer.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let chars = text.chars().count();
    if chars <= width {
        return vec![text.to_owned()];
    }
    // Byte offsets of the characters, and the offset after `width` of them.
    let offset = |n: usize| text.char_indices().nth(n).map_or(text.len(), |(i, _)| i);
    let (middle, limit) = (offset(chars / 2), offset(width));
    let spaces = text
        .match_indices(' ')
        .map(|(i, _)| i)
        .filter(|&i| i <= limit);
    let split = spaces.min_by_key(|&i| i.abs_diff(middle)).unwrap_or(limit);
    let (first, second) = text.split_at(split);
    vec![first.to_owned(), shortened(second.trim_start(), width)]
}

/// `text` cut to `width` characters around an ellipsis in the middle, if it is longer: the
/// end of a legend name or a bar's label (a y column, an x value) tells it from its
/// neighbours as much as the start.
fn shortened_middle(text: &str, width: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= width {
        return text.to_owned();
    }
    let tail = width.saturating_sub(1) / 2;
    let head = width.saturating_sub(1) - tail;
    let (start, end) = (&chars[..head], &chars[chars.len() - tail..]);
    format!(
        "{}\u{2026}{}",
        start.iter().collect::<String>(),
        end.iter().collect::<String>()
    )
}

/// `text` cut to `width` characters, the last an ellipsis, if it is longer.
fn shortened(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let kept: String = text.chars().take(width.saturating_sub(1)).collect();
    format!("{kept}\u{2026}")
}

/// The y axis with its ticks, grid lines and title.
fn y_axis(svg: &mut String, frame: &Frame, y_ticks: &[f64], title: &str) {
    for &t in y_ticks {
        let y = frame.py(t);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#dddddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            WIDTH - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            number(t)
        );
    }
    let mid = (TOP + HEIGHT - BOTTOM) / 2.0;
    let _ = writeln!(
        svg,
        r#"<text x="18" y="{mid:.1}" text-anchor="middle" transform="rotate(-90 18 {mid:.1})">{}</text>"#,
        escape(title)
    );
    let _ = writeln!(
        svg,
        r#"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{:.1}" stroke="black"/><line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="black"/>"#,
        HEIGHT - BOTTOM,
        HEIGHT - BOTTOM,
        WIDTH - RIGHT,
        HEIGHT - BOTTOM
    );
}

/// The x axis's title, `below` the axis (bars leave room for their slanted labels).
fn x_title(svg: &mut String, title: &str, below: f64) {
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        (WIDTH - RIGHT + LEFT) / 2.0,
        HEIGHT - BOTTOM + below,
        escape(title)
    );
}

/// Dash patterns of lines, one per round of the colours, so that up to 32 lines differ.
const DASHES: [&str; 4] = ["", "6 3", "2 3", "8 3 2 3"];

/// Legend entries that fit beside the plot, one row of 20 px each.
const LEGEND_ROWS: usize = 20;

/// Characters of a legend name that fit in the right margin.
const LEGEND_CHARS: usize = 26;

/// The colour and dash pattern of line (or segment) `i`.
fn style(i: usize) -> (&'static str, &'static str) {
    let (colour, round) = (i % COLOURS.len(), i / COLOURS.len());
    (COLOURS[colour], DASHES[round % DASHES.len()])
}

/// What a legend entry shows beside its name: a filled box (bars) or a line (lines).
#[derive(Clone, Copy)]
enum Swatch {
    Box,
    Line,
}

fn legend(svg: &mut String, names: &[String], swatch: Swatch) {
    // Past the rows that fit, the last one says how many more the table lists.
    let shown = match names.len() > LEGEND_ROWS {
        true => LEGEND_ROWS - 1,
        false => names.len(),
    };
    let x = WIDTH - RIGHT + 16.0;
    for (i, name) in names.iter().take(shown).enumerate() {
        let y = TOP + 10.0 + 20.0 * i as f64;
        let (colour, dash) = style(i);
        let _ = match swatch {
            Swatch::Box => write!(
                svg,
                r#"<rect x="{x:.1}" y="{:.1}" width="14" height="10" fill="{colour}"/>"#,
                y - 9.0
            ),
            Swatch::Line => write!(
                svg,
                r#"<line x1="{x:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{colour}" stroke-width="2"{}/>"#,
                y - 4.0,
                x + 16.0,
                y - 4.0,
                dash_attribute(dash)
            ),
        };
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{y:.1}">{}</text>"#,
            x + 20.0,
            escape(&shortened_middle(name, LEGEND_CHARS))
        );
    }
    if shown < names.len() {
        let y = TOP + 10.0 + 20.0 * shown as f64;
        let _ = writeln!(
            svg,
            r#"<text x="{x:.1}" y="{y:.1}">and {} more (see the table)</text>"#,
            names.len() - shown
        );
    }
}

fn dash_attribute(dash: &str) -> String {
    match dash {
        "" => String::new(),
        d => format!(r#" stroke-dasharray="{d}""#),
    }
}

/// A note across the plotting area of a figure with nothing to draw.
fn nothing_to_draw(svg: &mut String) {
    let _ = writeln!(
        svg,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#666666">no measured points (see the table)</text>"##,
        (WIDTH - RIGHT + LEFT) / 2.0,
        (TOP + HEIGHT - BOTTOM) / 2.0
    );
}

/// The range of `values` padded so nothing sits on the frame, including 0 when `from_zero`.
fn range(values: impl Iterator<Item = f64>, from_zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if from_zero {
        lo = lo.min(0.0);
        hi = hi.max(0.0);
    }
    if hi - lo < 1e-12 * hi.abs().max(1.0) {
        let pad = hi.abs().max(1.0) * 0.1;
        return (lo - pad, hi + pad);
    }
    (lo, hi)
}

/// A line chart of `lines`, each with markers and one-sigma error bars.
pub fn line_chart(labels: &Labels, lines: &[Line]) -> String {
    let xs = lines.iter().flat_map(|l| l.points.iter().map(|p| p.0));
    let ys = lines
        .iter()
        .flat_map(|l| l.points.iter().flat_map(|p| [p.1 - p.2, p.1 + p.2]));
    let x_ticks = {
        let (lo, hi) = range(xs, false);
        ticks(lo, hi)
    };
    let y_ticks = {
        let (lo, hi) = range(ys, true);
        ticks(lo, hi)
    };
    let frame = Frame {
        x: (x_ticks[0], *x_ticks.last().unwrap_or(&1.0)),
        y: (y_ticks[0], *y_ticks.last().unwrap_or(&1.0)),
    };
    let mut svg = String::new();
    header(&mut svg, labels);
    y_axis(&mut svg, &frame, &y_ticks, &labels.y);
    for &t in &x_ticks {
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            frame.px(t),
            HEIGHT - BOTTOM + 18.0,
            number(t)
        );
    }
    x_title(&mut svg, &labels.x, 42.0);
    for (i, line) in lines.iter().enumerate() {
        draw_line(&mut svg, &frame, line, style(i));
    }
    if lines.iter().all(|l| l.points.is_empty()) {
        nothing_to_draw(&mut svg);
    }
    let names: Vec<String> = lines.iter().map(|l| l.label.clone()).collect();
    legend(&mut svg, &names, Swatch::Line);
    svg.push_str("</svg>\n");
    svg
}

fn draw_line(svg: &mut String, frame: &Frame, line: &Line, (colour, dash): (&str, &str)) {
    let path: Vec<String> = line
        .points
        .iter()
        .map(|&(x, y, _)| format!("{:.1},{:.1}", frame.px(x), frame.py(y)))
        .collect();
    let _ = writeln!(
        svg,
        r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"{}/>"#,
        path.join(" "),
        dash_attribute(dash)
    );
    for &(x, y, e) in &line.points {
        let (px, py) = (frame.px(x), frame.py(y));
        if e > 0.0 {
            // Capped, so that a bar shorter than the marker still shows.
            let (low, high) = (frame.py(y - e), frame.py(y + e));
            let _ = writeln!(
                svg,
                r#"<path d="M{px:.1} {low:.1}V{high:.1}M{:.1} {low:.1}h10M{:.1} {high:.1}h10" stroke="{colour}" fill="none"/>"#,
                px - 5.0,
                px - 5.0
            );
        }
        let _ = writeln!(
            svg,
            r#"<circle cx="{px:.1}" cy="{py:.1}" r="3.5" fill="{colour}"/>"#
        );
    }
}

/// Characters of a bar's slanted label that stay clear of the x axis's title.
const BAR_LABEL_CHARS: usize = 20;

/// A stacked bar chart: one bar per `bars` entry, its segments stacked in `segment_names`
/// order.
pub fn stacked_bars(labels: &Labels, segment_names: &[String], bars: &[Bar]) -> String {
    let totals = bars.iter().map(|b| b.segments.iter().sum::<f64>());
    let y_ticks = {
        let (lo, hi) = range(totals, true);
        ticks(lo, hi)
    };
    let frame = Frame {
        x: (0.0, bars.len().max(1) as f64),
        y: (y_ticks[0], *y_ticks.last().unwrap_or(&1.0)),
    };
    let mut svg = String::new();
    header(&mut svg, labels);
    y_axis(&mut svg, &frame, &y_ticks, &labels.y);
    let slot = frame.px(1.0) - frame.px(0.0);
    for (i, bar) in bars.iter().enumerate() {
        let x = frame.px(i as f64) + slot * 0.15;
        let mut base = 0.0;
        for (k, &h) in bar.segments.iter().enumerate() {
            let (top, bottom) = (frame.py(base + h), frame.py(base));
            let _ = writeln!(
                svg,
                r#"<rect x="{x:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="{}"/>"#,
                slot * 0.7,
                (bottom - top).max(0.0),
                style(k).0
            );
            base += h;
        }
        let (lx, ly) = (frame.px(i as f64 + 0.5), HEIGHT - BOTTOM + 12.0);
        let _ = writeln!(
            svg,
            r#"<text x="{lx:.1}" y="{ly:.1}" text-anchor="end" font-size="10" transform="rotate(-35 {lx:.1} {ly:.1})">{}</text>"#,
            escape(&shortened_middle(&bar.label, BAR_LABEL_CHARS))
        );
    }
    if bars.is_empty() {
        nothing_to_draw(&mut svg);
    }
    x_title(&mut svg, &labels.x, BOTTOM - 8.0);
    legend(&mut svg, segment_names, Swatch::Box);
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(0.0, 10.0), [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let labels: Vec<String> = ticks(0.6, 1.2).into_iter().map(number).collect();
        assert_eq!(labels, ["0.6", "0.7", "0.8", "0.9", "1", "1.1", "1.2"]);
        let t = ticks(3.0, 1234.0);
        assert!(t[0] <= 3.0 && *t.last().unwrap() >= 1234.0, "{t:?}");
        assert_eq!(number(0.5), "0.5");
        assert_eq!(number(12000.0), "12000");
        assert_eq!(number(2.5e7), "2.5e7");
    }

    #[test]
    fn long_titles_wrap_and_crowded_legends_say_what_they_leave_out() {
        let title =
            "Batch time against the number of DPUs at two data sizes (3 refused, see the table)";
        let lines = wrap(title, TITLE_CHARS);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines.join(" "), title);
        assert!(lines.iter().all(|l| l.chars().count() <= TITLE_CHARS));
        assert_eq!(wrap("short", TITLE_CHARS), ["short"]);
        // Very long, with and without spaces: both lines within the width, the cut shown
        // by an ellipsis.
        for long in ["word ".repeat(60), "x".repeat(300), "\u{e9}".repeat(200)] {
            let lines = wrap(&long, TITLE_CHARS);
            assert_eq!(lines.len(), 2);
            assert!(
                lines.iter().all(|l| l.chars().count() <= TITLE_CHARS),
                "{lines:?}"
            );
            assert!(lines[1].ends_with('\u{2026}'), "{lines:?}");
        }
        assert_eq!(shortened("abcdef", 4), "abc\u{2026}");
        // Legend names that differ only at the end stay apart.
        let route = shortened_middle("qdd-double-scan: breakdown_us.route", LEGEND_CHARS);
        let merge = shortened_middle("qdd-double-scan: breakdown_us.merge", LEGEND_CHARS);
        assert_ne!(route, merge);
        assert_eq!(route.chars().count(), LEGEND_CHARS);
        assert_eq!(shortened_middle("abcdefgh", 5), "ab\u{2026}gh");
        assert_eq!(shortened_middle("short", 5), "short");
        // 30 lines: 19 named, then a note; lines past the 8 colours are dashed.
        let many: Vec<Line> = (0..30)
            .map(|i| Line {
                label: format!("series {i}"),
                points: vec![(1.0, i as f64, 0.0)],
            })
            .collect();
        let labels = Labels {
            title: "t".into(),
            x: "x".into(),
            y: "y".into(),
        };
        let svg = line_chart(&labels, &many);
        assert!(svg.contains(">series 18<") && !svg.contains(">series 19<"));
        assert!(svg.contains(">and 11 more (see the table)<"), "{svg}");
        assert_eq!(style(8), (COLOURS[0], DASHES[1]));
        assert!(svg.contains(r#"stroke-dasharray="6 3""#));
        assert!(!svg.contains("no measured points"));
        // Nothing to draw (every point refused): said across the plot.
        let empty = [Line {
            label: "a".into(),
            points: vec![],
        }];
        assert!(line_chart(&labels, &empty).contains(">no measured points (see the table)<"));
        assert!(stacked_bars(&labels, &["cpu".into()], &[]).contains("no measured points"));
    }

    #[test]
    fn the_same_data_gives_the_same_bytes_and_escapes_text() {
        let labels = Labels {
            title: "a < b & c".into(),
            x: "skew".into(),
            y: "IF_q".into(),
        };
        let lines = [Line {
            label: "qdd".into(),
            points: vec![(0.6, 1.2, 0.1), (1.0, 1.5, 0.0)],
        }];
        let a = line_chart(&labels, &lines);
        assert_eq!(a, line_chart(&labels, &lines));
        assert!(
            a.contains("a &lt; b &amp; c") && a.starts_with("<svg"),
            "{a}"
        );
        assert_eq!(a.matches("<circle").count(), 2);
        let bars = [Bar {
            label: "0.6".into(),
            segments: vec![1.0, 2.0],
        }];
        let b = stacked_bars(&labels, &["cpu".into(), "pim".into()], &bars);
        assert_eq!(
            b.matches("<rect x=").count(),
            2 + 2,
            "two segments, two legend keys"
        );
    }
}

//! Colour math of the person contract: sRGB hex <-> OKLab with Björn Ottosson's matrices (the
//! numbers agent-compose uses), the legibility gate, and a role's favourite as the person
//! contract's "Favorite colors" describes it (centroid, chroma restored to the components' minimum,
//! lightness clamped into the band).
//!
//! The favourite is only derived when a package (which stores none) becomes a persona pack; a
//! snapshot's `favorite_color` is always carried as written, never recomputed.

/// The legible lightness band and chroma floor of the parse gate.
pub const L_MIN: f64 = 0.60;
pub const L_MAX: f64 = 0.80;
pub const C_MIN: f64 = 0.05;

/// An OKLab colour.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lab {
    pub l: f64,
    pub a: f64,
    pub b: f64,
}

impl Lab {
    pub fn chroma(&self) -> f64 {
        self.a.hypot(self.b)
    }
}

/// Parses `#rrggbb` (case-insensitive; the `#` is required).
pub fn parse_hex(hex: &str) -> Option<[u8; 3]> {
    let digits = hex.strip_prefix('#')?;
    if digits.len() != 6 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let byte = |i: usize| u8::from_str_radix(&digits[i..i + 2], 16).ok();
    Some([byte(0)?, byte(2)?, byte(4)?])
}

pub fn to_hex(rgb: [u8; 3]) -> String {
    format!("#{:02x}{:02x}{:02x}", rgb[0], rgb[1], rgb[2])
}

fn to_linear(c: f64) -> f64 {
    if c <= 0.04045 {
        c / 12.92
    } else {
        ((c + 0.055) / 1.055).powf(2.4)
    }
}

fn from_linear(c: f64) -> f64 {
    if c <= 0.0031308 {
        12.92 * c
    } else {
        1.055 * c.powf(1.0 / 2.4) - 0.055
    }
}

pub fn oklab(rgb: [u8; 3]) -> Lab {
    let [r, g, b] = rgb.map(|c| to_linear(f64::from(c) / 255.0));
    let l = 0.4122214708 * r + 0.5363325363 * g + 0.0514459929 * b;
    let m = 0.2119034982 * r + 0.6806995451 * g + 0.1073969566 * b;
    let s = 0.0883024619 * r + 0.2817188376 * g + 0.6299787005 * b;
    let (l, m, s) = (l.cbrt(), m.cbrt(), s.cbrt());
    Lab {
        l: 0.2104542553 * l + 0.7936177850 * m - 0.0040720468 * s,
        a: 1.9779984951 * l - 2.4285922050 * m + 0.4505937099 * s,
        b: 0.0259040371 * l + 0.7827717662 * m - 0.8086757660 * s,
    }
}

/// OKLab back to 8-bit sRGB, each channel clipped into the gamut.
pub fn to_rgb(lab: Lab) -> [u8; 3] {
    let l = lab.l + 0.3963377774 * lab.a + 0.2158037573 * lab.b;
    let m = lab.l - 0.1055613458 * lab.a - 0.0638541728 * lab.b;
    let s = lab.l - 0.0894841775 * lab.a - 1.2914855480 * lab.b;
    let (l, m, s) = (l * l * l, m * m * m, s * s * s);
    let linear = [
        4.0767416621 * l - 3.3077115913 * m + 0.2309699292 * s,
        -1.2684380046 * l + 2.6097574011 * m - 0.3413193965 * s,
        -0.0041960863 * l - 0.7034186147 * m + 1.7076147010 * s,
    ];
    linear.map(|c| {
        (from_linear(c.clamp(0.0, 1.0)) * 255.0)
            .round()
            .clamp(0.0, 255.0) as u8
    })
}

/// Why a colour fails the parse gate, or `None` when it is legible.
pub fn illegible(hex: &str) -> Option<String> {
    let Some(rgb) = parse_hex(hex) else {
        return Some(format!("`{hex}` is not a #rrggbb colour"));
    };
    let lab = oklab(rgb);
    if !(L_MIN..=L_MAX).contains(&lab.l) {
        return Some(format!(
            "{hex} has OKLab lightness {:.3}, outside [{L_MIN:.2}, {L_MAX:.2}]",
            lab.l
        ));
    }
    if lab.chroma() < C_MIN {
        return Some(format!(
            "{hex} has OKLab chroma {:.3}, below {C_MIN:.2}",
            lab.chroma()
        ));
    }
    None
}

/// The favourite of a meld: the OKLab centroid, its chroma restored to the smallest component
/// chroma, its lightness clamped into the legible band. `None` when a colour does not parse or
/// the result is still grey.
pub fn favorite(hexes: &[&str]) -> Option<String> {
    let labs: Vec<Lab> = hexes
        .iter()
        .map(|h| parse_hex(h).map(oklab))
        .collect::<Option<_>>()?;
    if labs.is_empty() {
        return None;
    }
    let n = labs.len() as f64;
    let mut c = Lab {
        l: labs.iter().map(|x| x.l).sum::<f64>() / n,
        a: labs.iter().map(|x| x.a).sum::<f64>() / n,
        b: labs.iter().map(|x| x.b).sum::<f64>() / n,
    };
    let floor = labs.iter().map(Lab::chroma).fold(f64::INFINITY, f64::min);
    let chroma = c.chroma();
    if chroma < floor && chroma > 1e-9 {
        c.a *= floor / chroma;
        c.b *= floor / chroma;
    }
    c.l = c.l.clamp(L_MIN, L_MAX);
    (c.chroma() >= C_MIN).then(|| to_hex(to_rgb(c)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn white_and_black_have_known_lightness() {
        assert!((oklab([255, 255, 255]).l - 1.0).abs() < 1e-3);
        assert!(oklab([0, 0, 0]).l.abs() < 1e-9);
        assert_eq!(to_rgb(oklab([0x8f, 0x8c, 0x47])), [0x8f, 0x8c, 0x47]);
    }

    #[test]
    fn gate_and_favourite() {
        assert!(illegible("#8f8c47").is_none());
        assert!(illegible("#ffffff").unwrap().contains("lightness"));
        assert!(illegible("#999999").unwrap().contains("chroma"));
        assert!(illegible("red").is_some());
        let fav = favorite(&["#8f8c47", "#5fa87a"]).unwrap();
        assert!(illegible(&fav).is_none(), "{fav}");
    }
}

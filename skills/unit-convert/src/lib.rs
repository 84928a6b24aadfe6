//! The `unit-convert` skill: converts between units of length, area, volume,
//! mass, temperature, speed, time, data size, pressure, energy and power, and
//! converts date-times between time zones (IANA names, via chrono-tz).
//!
//! Pure computation: the unit table below and the time-zone database
//! compiled into the component are all it reads.

use chrono::{DateTime, FixedOffset, LocalResult, NaiveDate, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;
use skillhost_sdk::prelude::*;

// ---------------------------------------------------------------- the units

/// One unit: `base = value * factor + offset`.
struct Unit {
    quantity: &'static str,
    symbol: &'static str,
    name: &'static str,
    factor: f64,
    offset: f64,
    aliases: &'static [&'static str],
}

const fn unit(quantity: &'static str, symbol: &'static str, name: &'static str, factor: f64, aliases: &'static [&'static str]) -> Unit {
    Unit { quantity, symbol, name, factor, offset: 0.0, aliases }
}

/// Quantities and their base units, in listing order.
const QUANTITIES: &[(&str, &str)] = &[
    ("length", "m"),
    ("area", "m2"),
    ("volume", "l"),
    ("mass", "kg"),
    ("temperature", "K"),
    ("speed", "m/s"),
    ("time", "s"),
    ("data", "B"),
    ("pressure", "Pa"),
    ("energy", "J"),
    ("power", "W"),
];

/// Every unit. Order matters for case-insensitive lookups: the first match
/// wins, so bytes come before bits (`mb` is a megabyte, `Mb` a megabit).
const UNITS: &[Unit] = &[
    // length (metre)
    unit("length", "nm", "nanometre", 1e-9, &["nanometer", "nanometers", "nanometres"]),
    unit("length", "µm", "micrometre", 1e-6, &["um", "micrometer", "micron", "microns"]),
    unit("length", "mm", "millimetre", 1e-3, &["millimeter"]),
    unit("length", "cm", "centimetre", 1e-2, &["centimeter"]),
    unit("length", "dm", "decimetre", 0.1, &["decimeter"]),
    unit("length", "m", "metre", 1.0, &["meter", "metres", "meters"]),
    unit("length", "km", "kilometre", 1e3, &["kilometer", "kms"]),
    unit("length", "in", "inch", 0.0254, &["inches", "\""]),
    unit("length", "ft", "foot", 0.3048, &["feet", "'"]),
    unit("length", "yd", "yard", 0.9144, &[]),
    unit("length", "mi", "mile", 1609.344, &["statute mile"]),
    unit("length", "nmi", "nautical mile", 1852.0, &["NM", "nautical miles"]),
    unit("length", "au", "astronomical unit", 149_597_870_700.0, &["AU"]),
    unit("length", "ly", "light-year", 9_460_730_472_580_800.0, &["light year", "lightyear"]),
    // area (square metre)
    unit("area", "mm2", "square millimetre", 1e-6, &["mm²", "sq mm", "square millimeter"]),
    unit("area", "cm2", "square centimetre", 1e-4, &["cm²", "sq cm", "square centimeter"]),
    unit("area", "m2", "square metre", 1.0, &["m²", "sq m", "sqm", "square meter"]),
    unit("area", "ha", "hectare", 1e4, &[]),
    unit("area", "km2", "square kilometre", 1e6, &["km²", "sq km", "square kilometer"]),
    unit("area", "in2", "square inch", 0.000_645_16, &["in²", "sq in", "square inches"]),
    unit("area", "ft2", "square foot", 0.092_903_04, &["ft²", "sq ft", "sqft", "square feet"]),
    unit("area", "yd2", "square yard", 0.836_127_36, &["yd²", "sq yd"]),
    unit("area", "acre", "acre", 4_046.856_422_4, &["ac"]),
    unit("area", "mi2", "square mile", 2_589_988.110_336, &["mi²", "sq mi"]),
    // volume (litre)
    unit("volume", "ml", "millilitre", 1e-3, &["mL", "milliliter", "cm3", "cm³", "cc"]),
    unit("volume", "cl", "centilitre", 1e-2, &["cL", "centiliter"]),
    unit("volume", "dl", "decilitre", 0.1, &["dL", "deciliter"]),
    unit("volume", "l", "litre", 1.0, &["L", "liter", "litres", "liters"]),
    unit("volume", "m3", "cubic metre", 1e3, &["m³", "cubic meter"]),
    unit("volume", "in3", "cubic inch", 0.016_387_064, &["in³", "cu in"]),
    unit("volume", "ft3", "cubic foot", 28.316_846_592, &["ft³", "cu ft", "cubic feet"]),
    unit("volume", "tsp", "US teaspoon", 0.004_928_921_593_75, &["teaspoon"]),
    unit("volume", "tbsp", "US tablespoon", 0.014_786_764_781_25, &["tablespoon"]),
    unit("volume", "fl oz", "US fluid ounce", 0.029_573_529_562_5, &["floz", "fluid ounce", "fl. oz."]),
    unit("volume", "cup", "US cup", 0.236_588_236_5, &["cups"]),
    unit("volume", "pt", "US pint", 0.473_176_473, &["pint"]),
    unit("volume", "qt", "US quart", 0.946_352_946, &["quart"]),
    unit("volume", "gal", "US gallon", 3.785_411_784, &["gallon", "us gal"]),
    unit("volume", "imp fl oz", "imperial fluid ounce", 0.028_413_062_5, &["uk fl oz"]),
    unit("volume", "imp pt", "imperial pint", 0.568_261_25, &["uk pint", "imperial pint"]),
    unit("volume", "imp qt", "imperial quart", 1.136_522_5, &["uk quart"]),
    unit("volume", "imp gal", "imperial gallon", 4.546_09, &["uk gallon", "imperial gallon"]),
    unit("volume", "bbl", "oil barrel", 158.987_294_928, &["barrel"]),
    // mass (kilogram)
    unit("mass", "µg", "microgram", 1e-9, &["ug", "mcg"]),
    unit("mass", "mg", "milligram", 1e-6, &[]),
    unit("mass", "g", "gram", 1e-3, &["gramme"]),
    unit("mass", "kg", "kilogram", 1.0, &["kilo", "kilos", "kgs"]),
    unit("mass", "t", "tonne", 1e3, &["metric ton", "tonnes"]),
    unit("mass", "ct", "carat", 2e-4, &[]),
    unit("mass", "oz", "ounce", 0.028_349_523_125, &["ounces"]),
    unit("mass", "ozt", "troy ounce", 0.031_103_476_8, &["oz t", "troy oz"]),
    unit("mass", "lb", "pound", 0.453_592_37, &["lbs", "pounds"]),
    unit("mass", "st", "stone", 6.350_293_18, &["stones"]),
    unit("mass", "short ton", "US ton", 907.184_74, &["us ton", "ton"]),
    unit("mass", "long ton", "imperial ton", 1_016.046_908_8, &["uk ton", "imperial ton"]),
    // temperature (kelvin): base = value * factor + offset
    Unit { quantity: "temperature", symbol: "K", name: "kelvin", factor: 1.0, offset: 0.0, aliases: &["kelvins"] },
    Unit {
        quantity: "temperature",
        symbol: "°C",
        name: "degree Celsius",
        factor: 1.0,
        offset: 273.15,
        aliases: &["C", "celsius", "degC", "centigrade", "deg C"],
    },
    Unit {
        quantity: "temperature",
        symbol: "°F",
        name: "degree Fahrenheit",
        factor: 5.0 / 9.0,
        offset: 459.67 * 5.0 / 9.0,
        aliases: &["F", "fahrenheit", "degF", "deg F"],
    },
    Unit { quantity: "temperature", symbol: "°R", name: "degree Rankine", factor: 5.0 / 9.0, offset: 0.0, aliases: &["R", "rankine"] },
    // speed (metre per second)
    unit("speed", "m/s", "metre per second", 1.0, &["mps", "meters per second", "metres per second"]),
    unit("speed", "km/h", "kilometre per hour", 1.0 / 3.6, &["kph", "kmh", "km/hr", "kilometers per hour"]),
    unit("speed", "mph", "mile per hour", 0.447_04, &["mi/h", "miles per hour"]),
    unit("speed", "kn", "knot", 1852.0 / 3600.0, &["kt", "knots"]),
    unit("speed", "ft/s", "foot per second", 0.3048, &["fps", "feet per second"]),
    // time (second)
    unit("time", "ns", "nanosecond", 1e-9, &[]),
    unit("time", "µs", "microsecond", 1e-6, &["us"]),
    unit("time", "ms", "millisecond", 1e-3, &[]),
    unit("time", "s", "second", 1.0, &["sec", "secs"]),
    unit("time", "min", "minute", 60.0, &["mins"]),
    unit("time", "h", "hour", 3600.0, &["hr", "hrs"]),
    unit("time", "d", "day", 86_400.0, &[]),
    unit("time", "wk", "week", 604_800.0, &[]),
    unit("time", "mo", "month (average, 30.436875 days)", 2_629_746.0, &["month"]),
    unit("time", "yr", "year (average Gregorian, 365.2425 days)", 31_556_952.0, &["y", "year", "a"]),
    // data (byte): SI prefixes are powers of 1000, binary (KiB...) of 1024
    unit("data", "B", "byte", 1.0, &["byte", "bytes", "octet"]),
    unit("data", "kB", "kilobyte (1000 B)", 1e3, &["KB", "kilobyte"]),
    unit("data", "MB", "megabyte (1000² B)", 1e6, &["megabyte"]),
    unit("data", "GB", "gigabyte (1000³ B)", 1e9, &["gigabyte"]),
    unit("data", "TB", "terabyte (1000⁴ B)", 1e12, &["terabyte"]),
    unit("data", "PB", "petabyte (1000⁵ B)", 1e15, &["petabyte"]),
    unit("data", "KiB", "kibibyte (1024 B)", 1024.0, &["kibibyte"]),
    unit("data", "MiB", "mebibyte (1024² B)", 1_048_576.0, &["mebibyte"]),
    unit("data", "GiB", "gibibyte (1024³ B)", 1_073_741_824.0, &["gibibyte"]),
    unit("data", "TiB", "tebibyte (1024⁴ B)", 1_099_511_627_776.0, &["tebibyte"]),
    unit("data", "PiB", "pebibyte (1024⁵ B)", 1_125_899_906_842_624.0, &["pebibyte"]),
    unit("data", "bit", "bit", 0.125, &["bits"]),
    unit("data", "kbit", "kilobit (1000 bit)", 125.0, &["Kb", "kilobit"]),
    unit("data", "Mbit", "megabit (1000² bit)", 125e3, &["Mb", "megabit"]),
    unit("data", "Gbit", "gigabit (1000³ bit)", 125e6, &["Gb", "gigabit"]),
    unit("data", "Tbit", "terabit (1000⁴ bit)", 125e9, &["Tb", "terabit"]),
    // pressure (pascal)
    unit("pressure", "Pa", "pascal", 1.0, &[]),
    unit("pressure", "hPa", "hectopascal", 100.0, &[]),
    unit("pressure", "kPa", "kilopascal", 1e3, &[]),
    unit("pressure", "MPa", "megapascal", 1e6, &[]),
    unit("pressure", "mbar", "millibar", 100.0, &[]),
    unit("pressure", "bar", "bar", 1e5, &[]),
    unit("pressure", "atm", "standard atmosphere", 101_325.0, &["atmosphere"]),
    unit("pressure", "psi", "pound per square inch", 6_894.757_293_168, &["lbf/in2"]),
    unit("pressure", "mmHg", "millimetre of mercury", 133.322_387_415, &[]),
    unit("pressure", "inHg", "inch of mercury", 3386.389, &[]),
    unit("pressure", "torr", "torr", 101_325.0 / 760.0, &["Torr"]),
    // energy (joule)
    unit("energy", "J", "joule", 1.0, &["joules"]),
    unit("energy", "kJ", "kilojoule", 1e3, &[]),
    unit("energy", "MJ", "megajoule", 1e6, &[]),
    unit("energy", "cal", "calorie (thermochemical)", 4.184, &["calorie"]),
    unit("energy", "kcal", "kilocalorie (food Calorie)", 4184.0, &["Cal", "kilocalorie"]),
    unit("energy", "Wh", "watt-hour", 3600.0, &["watt hour"]),
    unit("energy", "kWh", "kilowatt-hour", 3.6e6, &["kilowatt hour"]),
    unit("energy", "BTU", "British thermal unit", 1_055.055_852_62, &["btu"]),
    unit("energy", "eV", "electronvolt", 1.602_176_634e-19, &[]),
    // power (watt)
    unit("power", "W", "watt", 1.0, &["watts"]),
    unit("power", "kW", "kilowatt", 1e3, &[]),
    unit("power", "MW", "megawatt", 1e6, &[]),
    unit("power", "hp", "mechanical horsepower", 745.699_871_582_270_2, &["horsepower", "bhp"]),
    unit("power", "PS", "metric horsepower", 735.498_75, &["metric horsepower", "cv"]),
    unit("power", "BTU/h", "BTU per hour", 0.293_071_070_172_222, &["btu/h", "btu/hr"]),
];

/// Finds a unit by symbol, alias or name: exactly, then ignoring case, then
/// without a plural `s`.
fn find_unit(query: &str) -> Option<&'static Unit> {
    let query = query.trim();
    let exact = |u: &Unit| u.symbol == query || u.aliases.contains(&query);
    if let Some(unit) = UNITS.iter().find(|u| exact(u)) {
        return Some(unit);
    }
    let lower = query.to_lowercase().replace("degrees ", "").replace("degree ", "");
    let loose = |candidate: &str| {
        UNITS.iter().find(|u| {
            u.symbol.to_lowercase() == candidate
                || u.name.to_lowercase() == candidate
                || u.name.split(" (").next().is_some_and(|n| n.to_lowercase() == candidate)
                || u.aliases.iter().any(|a| a.to_lowercase() == candidate)
        })
    };
    loose(&lower)
        .or_else(|| lower.strip_suffix("es").and_then(loose))
        .or_else(|| lower.strip_suffix('s').and_then(loose))
        .or_else(|| loose(&lower.replace("meter", "metre").replace("liter", "litre")))
}

/// The units closest to a misspelt one, as `symbol (name)`.
fn close_units(query: &str) -> Vec<String> {
    let query = query.trim().to_lowercase();
    let mut scored: Vec<(usize, &Unit)> = UNITS
        .iter()
        .filter_map(|u| {
            let names = std::iter::once(u.symbol).chain(std::iter::once(u.name)).chain(u.aliases.iter().copied());
            let best = names
                .map(|n| {
                    let n = n.to_lowercase();
                    if n.starts_with(&query) || (query.len() >= 3 && n.contains(&query)) { 0 } else { distance(&n, &query) }
                })
                .min()?;
            (best <= 2.max(query.len() / 3)).then_some((best, u))
        })
        .collect();
    scored.sort_by_key(|(d, _)| *d);
    scored.into_iter().take(8).map(|(_, u)| format!("{} ({})", u.symbol, u.name)).collect()
}

/// Levenshtein distance.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = (previous + usize::from(ca != *cb)).min(row[j] + 1).min(current + 1);
            previous = current;
        }
    }
    row[b.len()]
}

fn unknown_unit(field: &str, query: &str) -> ToolError {
    let close = close_units(query);
    let hint = if close.is_empty() {
        "call `units` to list every unit".to_owned()
    } else {
        format!("did you mean: {}? (call `units` to list every unit)", close.join(", "))
    };
    ToolError::invalid_input(format!("{field}: unknown unit `{query}`; {hint}"))
}

/// Rounds to 12 significant digits, hiding binary noise like `0.30000000000000004`.
fn round_significant(value: f64) -> f64 {
    if value == 0.0 || !value.is_finite() {
        return value;
    }
    let magnitude = value.abs().log10().floor() as i32;
    let scale = 10f64.powi(11 - magnitude);
    if !scale.is_finite() || scale == 0.0 {
        return value;
    }
    let rounded = (value * scale).round() / scale;
    if rounded.is_finite() { rounded } else { value }
}

fn format_number(value: f64) -> String {
    let abs = value.abs();
    if value != 0.0 && !(1e-6..1e15).contains(&abs) {
        return format!("{value:e}");
    }
    format!("{value}")
}

// ------------------------------------------------------------------ convert

/// A value and the units to convert between.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ConvertInput {
    /// The number to convert.
    value: f64,
    /// The unit of `value`: a symbol (`km`, `°F`, `MiB`, `fl oz`) or a name
    /// (`kilometre`, `fahrenheit`, `mebibyte`). Case matters only where it
    /// changes the meaning (`MB` megabyte vs `Mb` megabit).
    from: String,
    /// The unit to convert to, of the same quantity.
    to: String,
}

/// A converted value.
#[derive(Serialize, JsonSchema)]
struct ConvertOutput {
    /// The converted value (rounded to 12 significant digits).
    value: f64,
    /// The quantity both units measure (length, mass, data, ...).
    quantity: &'static str,
    /// The unit converted from.
    from: UnitInfo,
    /// The unit converted to.
    to: UnitInfo,
    /// The conversion as a sentence, e.g. `5 km = 3.10685596119 mi`.
    text: String,
}

/// A unit.
#[derive(Serialize, JsonSchema)]
struct UnitInfo {
    /// Its symbol.
    symbol: &'static str,
    /// Its name (with the definition when it is ambiguous, e.g. `US gallon`).
    name: &'static str,
}

/// Convert a value between units of length, area, volume, mass, temperature,
/// speed, time, data size (kB = 1000 B, KiB = 1024 B; bits vs bytes), pressure,
/// energy and power. Unknown units are answered with the closest matches; call
/// `units` for the full list.
#[tool(
    read_only,
    idempotent,
    example = r#"{"value": 5, "from": "km", "to": "mi"}"#,
    example = r#"{"value": 98.6, "from": "°F", "to": "°C"}"#,
    example = r#"{"value": 1, "from": "GiB", "to": "MB"}"#
)]
fn convert(input: ConvertInput) -> Result<ConvertOutput, ToolError> {
    if !input.value.is_finite() {
        return Err(ToolError::invalid_input("value: must be a finite number"));
    }
    let from = find_unit(&input.from).ok_or_else(|| unknown_unit("from", &input.from))?;
    let to = find_unit(&input.to).ok_or_else(|| unknown_unit("to", &input.to))?;
    if from.quantity != to.quantity {
        return Err(ToolError::invalid_input(format!(
            "cannot convert {} ({}) to {} ({}): they measure different quantities",
            from.quantity, from.symbol, to.quantity, to.symbol
        )));
    }
    let base = input.value * from.factor + from.offset;
    let value = round_significant((base - to.offset) / to.factor);
    if from.quantity == "temperature" && base < -1e-9 {
        return Err(ToolError::invalid_input(format!("value: {} {} is below absolute zero", input.value, from.symbol)));
    }
    Ok(ConvertOutput {
        value,
        quantity: from.quantity,
        text: format!("{} {} = {} {}", format_number(input.value), from.symbol, format_number(value), to.symbol),
        from: UnitInfo { symbol: from.symbol, name: from.name },
        to: UnitInfo { symbol: to.symbol, name: to.name },
    })
}

// -------------------------------------------------------------------- units

/// Which units to list.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UnitsInput {
    /// Only this quantity: length, area, volume, mass, temperature, speed,
    /// time, data, pressure, energy or power. Default: all of them.
    #[serde(default)]
    quantity: Option<String>,
}

/// Units by quantity.
#[derive(Serialize, JsonSchema)]
struct UnitsOutput {
    /// One entry per quantity.
    quantities: Vec<QuantityUnits>,
}

/// The units of one quantity.
#[derive(Serialize, JsonSchema)]
struct QuantityUnits {
    /// The quantity.
    quantity: &'static str,
    /// Its units.
    units: Vec<UnitListing>,
}

/// One unit and the other spellings accepted for it.
#[derive(Serialize, JsonSchema)]
struct UnitListing {
    /// Symbol.
    symbol: &'static str,
    /// Name.
    name: &'static str,
    /// Other accepted spellings.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    aliases: &'static [&'static str],
}

/// List the units `convert` understands, by quantity, with their accepted spellings.
#[tool(read_only, idempotent, example = r#"{}"#, example = r#"{"quantity": "data"}"#)]
fn units(input: UnitsInput) -> Result<UnitsOutput, ToolError> {
    let wanted = input.quantity.as_deref().map(|q| q.trim().to_lowercase());
    if let Some(q) = &wanted
        && !QUANTITIES.iter().any(|(name, _)| name == q)
    {
        let names: Vec<&str> = QUANTITIES.iter().map(|(name, _)| *name).collect();
        return Err(ToolError::invalid_input(format!("quantity: unknown quantity `{q}`; quantities are: {}", names.join(", "))));
    }
    let quantities = QUANTITIES
        .iter()
        .filter(|(name, _)| wanted.as_deref().is_none_or(|q| q == *name))
        .map(|(name, _)| QuantityUnits {
            quantity: name,
            units: UNITS
                .iter()
                .filter(|u| u.quantity == *name)
                .map(|u| UnitListing { symbol: u.symbol, name: u.name, aliases: u.aliases })
                .collect(),
        })
        .collect();
    Ok(UnitsOutput { quantities })
}

// ------------------------------------------------------------- convert_time

/// A date-time and the time zones to convert between.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TimeInput {
    /// An ISO 8601 date-time: `2024-03-10T14:30:00`, `2024-03-10 14:30`,
    /// `2024-03-10` (midnight), with an offset (`2024-03-10T14:30:00+01:00`,
    /// `...Z`) or without one (then `from_tz` says where it is), or `now`.
    datetime: String,
    /// The time zone of `datetime` when it has no offset: an IANA name
    /// (`Europe/Paris`, `America/New_York`), a city (`Tokyo`), `UTC`, or an
    /// offset (`+05:30`).
    #[serde(default)]
    from_tz: Option<String>,
    /// The time zone to convert to, in the same forms as `from_tz`.
    to_tz: String,
}

/// A converted date-time.
#[derive(Serialize, JsonSchema)]
struct TimeOutput {
    /// The input instant in its own zone, RFC 3339.
    input: String,
    /// The zone of the input (as resolved).
    from_tz: String,
    /// The same instant in `to_tz`, RFC 3339 with its offset.
    result: String,
    /// The zone converted to (as resolved).
    to_tz: String,
    /// UTC offset in `to_tz` at that instant, e.g. `+09:00`.
    offset: String,
    /// Zone abbreviation at that instant, e.g. `JST`, `CEST` (or the offset).
    abbreviation: String,
    /// Day of the week in `to_tz`.
    weekday: String,
    /// The instant in UTC, RFC 3339.
    utc: String,
    /// `to_tz`'s offset minus the input's, in hours (e.g. 8 from Paris to Tokyo in winter).
    difference_hours: f64,
    /// Anything worth knowing: an ambiguous local time, an ignored `from_tz`.
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

/// A time zone: an IANA zone or a fixed offset.
#[derive(Clone, Copy)]
enum Zone {
    Named(Tz),
    Fixed(FixedOffset),
}

impl Zone {
    fn parse(field: &str, text: &str) -> Result<Self, ToolError> {
        let trimmed = text.trim();
        let upper = trimmed.to_uppercase();
        if matches!(upper.as_str(), "UTC" | "GMT" | "Z" | "ZULU") {
            return Ok(Zone::Named(Tz::UTC));
        }
        if let Some(offset) = parse_offset(upper.trim_start_matches("UTC").trim_start_matches("GMT")) {
            return Ok(Zone::Fixed(offset));
        }
        if let Ok(tz) = trimmed.parse::<Tz>() {
            return Ok(Zone::Named(tz));
        }
        let wanted = trimmed.replace(' ', "_").to_lowercase();
        let by_name = chrono_tz::TZ_VARIANTS.iter().find(|tz| tz.name().to_lowercase() == wanted);
        let by_city = || {
            chrono_tz::TZ_VARIANTS
                .iter()
                .filter(|tz| tz.name().contains('/') && !tz.name().starts_with("Etc/"))
                .find(|tz| tz.name().rsplit('/').next().is_some_and(|city| city.to_lowercase() == wanted))
        };
        if let Some(tz) = by_name.or_else(by_city) {
            return Ok(Zone::Named(*tz));
        }
        let mut close: Vec<(usize, &str)> = chrono_tz::TZ_VARIANTS
            .iter()
            .map(|tz| {
                let name = tz.name();
                let lower = name.to_lowercase();
                let city = lower.rsplit('/').next().unwrap_or(&lower).to_owned();
                let d = if lower.contains(&wanted) { 0 } else { distance(&lower, &wanted).min(distance(&city, &wanted)) };
                (d, name)
            })
            .filter(|(d, _)| *d <= 2.max(wanted.len() / 4))
            .collect();
        close.sort();
        let close: Vec<&str> = close.into_iter().take(6).map(|(_, n)| n).collect();
        let hint = if close.is_empty() {
            "use an IANA name like `Europe/Paris`, `UTC` or an offset like `+05:30`".to_owned()
        } else {
            format!("did you mean: {}?", close.join(", "))
        };
        Err(ToolError::invalid_input(format!("{field}: unknown time zone `{trimmed}`; {hint}")))
    }

    fn name(&self) -> String {
        match self {
            Zone::Named(tz) => tz.name().to_owned(),
            Zone::Fixed(offset) => offset.to_string(),
        }
    }

    /// The instant `utc` in this zone, and the zone's abbreviation then.
    fn at(&self, utc: DateTime<Utc>) -> (DateTime<FixedOffset>, String) {
        match self {
            Zone::Named(tz) => {
                let local = utc.with_timezone(tz);
                (local.fixed_offset(), local.format("%Z").to_string())
            }
            Zone::Fixed(offset) => {
                let local = utc.with_timezone(offset);
                (local, local.format("%:z").to_string())
            }
        }
    }

    /// The instants a wall-clock time in this zone can be.
    fn resolve(&self, local: NaiveDateTime) -> LocalResult<DateTime<Utc>> {
        match self {
            Zone::Named(tz) => tz.from_local_datetime(&local).map(|t| t.with_timezone(&Utc)),
            Zone::Fixed(offset) => offset.from_local_datetime(&local).map(|t| t.with_timezone(&Utc)),
        }
    }
}

/// `+05:30`, `-0800`, `+9`: a fixed offset.
fn parse_offset(text: &str) -> Option<FixedOffset> {
    let sign = match text.chars().next()? {
        '+' => 1,
        '-' => -1,
        _ => return None,
    };
    let digits: String = text[1..].chars().filter(|c| *c != ':').collect();
    if digits.is_empty() || digits.len() > 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (hours, minutes) = if digits.len() <= 2 {
        (digits.parse::<i32>().ok()?, 0)
    } else {
        let split = digits.len() - 2;
        (digits[..split].parse::<i32>().ok()?, digits[split..].parse::<i32>().ok()?)
    };
    if hours > 14 || minutes >= 60 {
        return None;
    }
    FixedOffset::east_opt(sign * (hours * 3600 + minutes * 60))
}

fn parse_naive(text: &str) -> Option<NaiveDateTime> {
    const FORMATS: &[&str] = &["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%d %H:%M"];
    FORMATS
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(text, f).ok())
        .or_else(|| NaiveDate::parse_from_str(text, "%Y-%m-%d").ok().and_then(|d| d.and_hms_opt(0, 0, 0)))
}

/// Convert a date-time from one time zone to another (IANA names like
/// `America/New_York`, city names like `Tokyo`, `UTC` or offsets like
/// `+05:30`), daylight saving time included. Reports the result with its
/// offset and abbreviation, the weekday, UTC, and the hour difference.
#[tool(
    read_only,
    example = r#"{"datetime": "2024-07-01T09:00", "from_tz": "America/New_York", "to_tz": "Europe/Berlin"}"#,
    example = r#"{"datetime": "2024-01-15T18:30:00Z", "to_tz": "Asia/Tokyo"}"#,
    example = r#"{"datetime": "now", "to_tz": "Sydney"}"#
)]
fn convert_time(input: TimeInput) -> Result<TimeOutput, ToolError> {
    let to = Zone::parse("to_tz", &input.to_tz)?;
    let from = input.from_tz.as_deref().map(|tz| Zone::parse("from_tz", tz)).transpose()?;
    let text = input.datetime.trim();
    let mut note = None;

    let (utc, source_zone) = if text.eq_ignore_ascii_case("now") {
        (Utc::now(), from.unwrap_or(Zone::Named(Tz::UTC)))
    } else if let Ok(with_offset) = DateTime::parse_from_rfc3339(text)
        .or_else(|_| DateTime::parse_from_str(text, "%Y-%m-%dT%H:%M%:z"))
        .or_else(|_| DateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%:z"))
    {
        if let Some(from) = &from {
            note = Some(format!("datetime has its own offset ({}); from_tz `{}` was ignored", with_offset.offset(), from.name()));
        }
        (with_offset.with_timezone(&Utc), Zone::Fixed(*with_offset.offset()))
    } else {
        let naive = parse_naive(text).ok_or_else(|| {
            ToolError::invalid_input(format!(
                "datetime: `{text}` is not an ISO 8601 date-time; use e.g. `2024-03-10T14:30:00`, \
                 `2024-03-10T14:30:00+01:00` or `now`"
            ))
        })?;
        let from = from.ok_or_else(|| {
            ToolError::invalid_input(format!(
                "from_tz: `{text}` has no UTC offset, so give the time zone it is in (e.g. \
                 `Europe/Paris` or `UTC`), or add an offset to datetime"
            ))
        })?;
        let utc = match from.resolve(naive) {
            LocalResult::Single(utc) => utc,
            LocalResult::Ambiguous(earlier, later) => {
                note = Some(format!(
                    "{naive} happens twice in {} (clocks go back); used the earlier one, {} UTC, not {} UTC",
                    from.name(),
                    earlier.format("%H:%M"),
                    later.format("%H:%M")
                ));
                earlier
            }
            LocalResult::None => {
                return Err(ToolError::invalid_input(format!(
                    "datetime: {naive} does not exist in {} (clocks go forward then)",
                    from.name()
                )));
            }
        };
        (utc, from)
    };

    let (source, _) = source_zone.at(utc);
    let (local, abbreviation) = to.at(utc);
    let difference = local.offset().local_minus_utc() - source.offset().local_minus_utc();
    Ok(TimeOutput {
        input: source.to_rfc3339(),
        from_tz: source_zone.name(),
        result: local.to_rfc3339(),
        to_tz: to.name(),
        offset: local.format("%:z").to_string(),
        abbreviation,
        weekday: local.format("%A").to_string(),
        utc: utc.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
        difference_hours: f64::from(difference) / 3600.0,
        note,
    })
}

skillhost_sdk::skill!(convert, units, convert_time);

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(value: f64, from: &str, to: &str) -> Result<f64, ToolError> {
        convert(ConvertInput { value, from: from.into(), to: to.into() }).map(|o| o.value)
    }

    #[test]
    fn conversions() {
        assert_eq!(conv(1.0, "mi", "km").unwrap(), 1.609344);
        assert_eq!(conv(100.0, "°C", "°F").unwrap(), 212.0);
        assert_eq!(conv(32.0, "fahrenheit", "celsius").unwrap(), 0.0);
        assert_eq!(conv(0.0, "C", "K").unwrap(), 273.15);
        assert_eq!(conv(1.0, "KiB", "B").unwrap(), 1024.0);
        assert_eq!(conv(1.0, "KB", "B").unwrap(), 1000.0);
        assert_eq!(conv(8.0, "Mb", "MB").unwrap(), 1.0);
        assert_eq!(conv(1.0, "h", "min").unwrap(), 60.0);
        assert_eq!(conv(3.0, "feet", "inches").unwrap(), 36.0);
        assert_eq!(conv(1.0, "gallon", "liters").unwrap(), 3.785411784);
        assert_eq!(conv(100.0, "km/h", "m/s").unwrap(), 27.7777777778);
        assert_eq!(conv(0.1, "m", "cm").unwrap(), 10.0);
    }

    #[test]
    fn errors_suggest_units() {
        let Err(ToolError::InvalidInput(m)) = conv(1.0, "kilometr", "m") else { panic!() };
        assert!(m.contains("km (kilometre)"), "{m}");
        assert!(matches!(conv(1.0, "kg", "m"), Err(ToolError::InvalidInput(m)) if m.contains("mass")));
        assert!(conv(-500.0, "°C", "K").is_err());
    }

    fn time(datetime: &str, from: Option<&str>, to: &str) -> Result<TimeOutput, ToolError> {
        convert_time(TimeInput { datetime: datetime.into(), from_tz: from.map(Into::into), to_tz: to.into() })
    }

    #[test]
    fn time_zones() {
        let out = time("2024-07-01T09:00", Some("America/New_York"), "Europe/Berlin").unwrap();
        assert_eq!(out.result, "2024-07-01T15:00:00+02:00");
        assert_eq!(out.abbreviation, "CEST");
        assert_eq!(out.difference_hours, 6.0);
        let out = time("2024-01-15T18:30:00Z", None, "tokyo").unwrap();
        assert_eq!(out.result, "2024-01-16T03:30:00+09:00");
        assert_eq!(out.weekday, "Tuesday");
        let out = time("2024-01-15 12:00", Some("UTC"), "+05:30").unwrap();
        assert_eq!(out.result, "2024-01-15T17:30:00+05:30");
        assert!(time("2024-03-31T02:30", Some("Europe/Paris"), "UTC").is_err());
        assert!(time("2024-10-27T02:30", Some("Europe/Paris"), "UTC").unwrap().note.is_some());
        let Err(ToolError::InvalidInput(m)) = time("2024-01-01T00:00", Some("Europe/Pariss"), "UTC") else { panic!() };
        assert!(m.contains("Europe/Paris"), "{m}");
        assert!(time("2024-01-01T00:00", None, "UTC").is_err());
    }
}

//! What a model call cost (USAGE.md U5): a table of dated prices per model, shipped as data
//! (`data/deepseek-prices.json`, with its sources and date) and extended or overridden by a
//! user's file of the same shape. A call is priced at the price in force at its own time.

use serde::Deserialize;

use super::Tokens;

/// The shipped table: data, not code, so that keeping prices current is an edit of one file.
const SHIPPED: &str = include_str!("../../../data/deepseek-prices.json");

#[derive(Debug, thiserror::Error)]
pub enum PriceError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: not a price table: {why}")]
    Invalid { path: String, why: String },
}

/// USD per 1,000,000 tokens of each bucket.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    pub hit: f64,
    pub miss: f64,
    pub output: f64,
    /// `None`: the cache-miss price (DeepSeek charges no cache-write surcharge).
    pub write: Option<f64>,
}

impl Rates {
    /// The cost in USD of `t` at these rates.
    pub fn cost(&self, t: &Tokens) -> f64 {
        let write = self.write.unwrap_or(self.miss);
        (t.input as f64 * self.miss
            + t.cache_read as f64 * self.hit
            + t.cache_write as f64 * write
            + t.output as f64 * self.output)
            / 1_000_000.0
    }
}

/// A cheaper window of the UTC day, in minutes since midnight; it may wrap past midnight.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OffPeak {
    pub start: u32,
    pub end: u32,
    pub rates: Rates,
}

impl OffPeak {
    fn covers(&self, ms: i64) -> bool {
        let minute = (ms.rem_euclid(86_400_000) / 60_000) as u32;
        if self.start <= self.end {
            (self.start..self.end).contains(&minute)
        } else {
            minute >= self.start || minute < self.end
        }
    }
}

/// One dated price of one model (optionally of one provider's deployment of it).
#[derive(Debug, Clone, PartialEq)]
pub struct Price {
    pub model: String,
    pub provider: Option<String>,
    /// In force from this time (ms since the epoch, UTC); `None`: from the earliest time.
    pub from: Option<i64>,
    pub rates: Rates,
    pub off_peak: Option<OffPeak>,
}

impl Price {
    /// The rates of a call at `ms` under this price.
    pub fn rates_at(&self, ms: i64) -> Rates {
        match &self.off_peak {
            Some(o) if o.covers(ms) => o.rates,
            _ => self.rates,
        }
    }
}

/// Dated prices by model.
#[derive(Debug, Clone, Default)]
pub struct PriceTable {
    prices: Vec<Price>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum FileShape {
    Table { prices: Vec<Entry> },
    List(Vec<Entry>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    model: String,
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    from: Option<String>,
    hit: f64,
    miss: f64,
    output: f64,
    #[serde(default)]
    write: Option<f64>,
    #[serde(default, rename = "offPeak")]
    off_peak: Option<OffPeakEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OffPeakEntry {
    start: String,
    end: String,
    hit: f64,
    miss: f64,
    output: f64,
    #[serde(default)]
    write: Option<f64>,
}

/// `HH:MM` → minutes since midnight.
fn minutes(s: &str) -> Option<u32> {
    let (h, m) = s.split_once(':')?;
    let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
    (h < 24 && m < 60).then_some(h * 60 + m)
}

/// An RFC 3339 time, or a date (midnight UTC).
fn parse_from(s: &str) -> Option<i64> {
    if let Ok(ts) = s.parse::<jiff::Timestamp>() {
        return Some(ts.as_millisecond());
    }
    let date = s.parse::<jiff::civil::Date>().ok()?;
    date.to_zoned(jiff::tz::TimeZone::UTC)
        .ok()
        .map(|z| z.timestamp().as_millisecond())
}

fn rate(what: &str, v: f64) -> Result<f64, String> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(format!("{what} must be a price ≥ 0, got {v}"))
    }
}

fn rates(hit: f64, miss: f64, output: f64, write: Option<f64>) -> Result<Rates, String> {
    Ok(Rates {
        hit: rate("hit", hit)?,
        miss: rate("miss", miss)?,
        output: rate("output", output)?,
        write: write.map(|w| rate("write", w)).transpose()?,
    })
}

impl Entry {
    fn price(self) -> Result<Price, String> {
        let at = |why: String| format!("model {:?}: {why}", self.model);
        let from = match &self.from {
            None => None,
            Some(s) => Some(parse_from(s).ok_or_else(|| {
                at(format!(
                    "from {s:?} is neither an RFC 3339 time (2026-04-26T12:15:00Z) nor a date"
                ))
            })?),
        };
        let off_peak = match &self.off_peak {
            None => None,
            Some(o) => Some(OffPeak {
                start: minutes(&o.start)
                    .ok_or_else(|| at(format!("offPeak start {:?} is not HH:MM", o.start)))?,
                end: minutes(&o.end)
                    .ok_or_else(|| at(format!("offPeak end {:?} is not HH:MM", o.end)))?,
                rates: rates(o.hit, o.miss, o.output, o.write).map_err(&at)?,
            }),
        };
        let rates = rates(self.hit, self.miss, self.output, self.write).map_err(&at)?;
        Ok(Price {
            model: self.model,
            provider: self.provider,
            from,
            rates,
            off_peak,
        })
    }
}

fn parse_table(text: &str, path: &str) -> Result<Vec<Price>, PriceError> {
    let invalid = |why: String| PriceError::Invalid {
        path: path.to_owned(),
        why,
    };
    let shape: FileShape = serde_json::from_str(text).map_err(|e| {
        invalid(format!(
            "{e} (expected {{\"prices\":[{{\"model\",\"from\",\"hit\",\"miss\",\"output\"}},…]}} or a list of such entries)"
        ))
    })?;
    let entries = match shape {
        FileShape::Table { prices } | FileShape::List(prices) => prices,
    };
    entries
        .into_iter()
        .map(|e| e.price().map_err(&invalid))
        .collect()
}

impl PriceTable {
    /// DeepSeek's published prices, as shipped with dshs.
    pub fn shipped() -> PriceTable {
        PriceTable {
            // The shipped file is checked by a test; a broken one would be a build defect.
            prices: parse_table(SHIPPED, "data/deepseek-prices.json").unwrap_or_default(),
        }
    }

    /// An empty table: every model unpriced.
    pub fn empty() -> PriceTable {
        PriceTable::default()
    }

    /// Add the entries of a user's price file; an entry with the model, provider and `from`
    /// of one already known replaces it.
    pub fn load(&mut self, path: &std::path::Path) -> Result<(), PriceError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| PriceError::Read {
            path: shown.clone(),
            source,
        })?;
        self.add_text(&text, &shown)
    }

    /// [`PriceTable::load`] from text.
    pub fn add_text(&mut self, text: &str, name: &str) -> Result<(), PriceError> {
        for p in parse_table(text, name)? {
            match self
                .prices
                .iter_mut()
                .find(|q| q.model == p.model && q.provider == p.provider && q.from == p.from)
            {
                Some(q) => *q = p,
                None => self.prices.push(p),
            }
        }
        Ok(())
    }

    pub fn prices(&self) -> &[Price] {
        &self.prices
    }

    /// The price in force for `model` (served by `provider`) at `ms`: among the entries
    /// naming that provider, else among those naming none, the latest whose `from` is not
    /// after `ms`. `None`: the call is unpriced.
    pub fn price_at(&self, model: &str, provider: Option<&str>, ms: i64) -> Option<&Price> {
        let latest = |own: bool| {
            self.prices
                .iter()
                .filter(|p| p.model == model)
                .filter(|p| match (&p.provider, own) {
                    (Some(pp), true) => Some(pp.as_str()) == provider,
                    (None, false) => true,
                    _ => false,
                })
                .filter(|p| p.from.is_none_or(|f| f <= ms))
                .max_by_key(|p| p.from.unwrap_or(i64::MIN))
        };
        latest(true).or_else(|| latest(false))
    }

    /// What `tokens` of `model` at `ms` cost in USD; `None`: no price in force (unpriced,
    /// never 0).
    pub fn cost(
        &self,
        model: &str,
        provider: Option<&str>,
        ms: i64,
        tokens: &Tokens,
    ) -> Option<f64> {
        self.price_at(model, provider, ms)
            .map(|p| p.rates_at(ms).cost(tokens))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(s: &str) -> i64 {
        s.parse::<jiff::Timestamp>().unwrap().as_millisecond()
    }

    fn million(input: u64, cache_read: u64, output: u64) -> Tokens {
        Tokens {
            input,
            cache_read,
            cache_write: 0,
            output,
            reasoning: 0,
        }
    }

    #[test]
    fn shipped_table_parses_and_holds_every_dated_row_of_u5() {
        let t = PriceTable::shipped();
        assert_eq!(t.prices().len(), 14);
        parse_table(SHIPPED, "shipped").unwrap();
    }

    /// What the shipped table charges for `tokens` of `model` (no provider) at the instant `time`.
    fn shipped_cost(model: &str, time: &str, tokens: &Tokens) -> Option<f64> {
        PriceTable::shipped().cost(model, None, ms(time), tokens)
    }

    #[test]
    fn price_change_at_2026_04_26_1215_prices_each_side_by_its_own_time() {
        let m = million(0, 1_000_000, 0);
        let at = |time| shipped_cost("deepseek-v4-flash", time, &m).unwrap();
        let (before, after) = (at("2026-04-26T12:14:59Z"), at("2026-04-26T12:15:00Z"));
        assert!((before - 0.028).abs() < 1e-12, "{before}");
        assert!((after - 0.0028).abs() < 1e-12, "{after}");
    }

    #[test]
    fn off_peak_2025_hours_are_cheaper_and_end_with_september_2025() {
        let m = million(1_000_000, 0, 1_000_000);
        let at = |time| shipped_cost("deepseek-reasoner", time, &m).unwrap();
        let peak = at("2025-03-01T12:00:00Z");
        let off = at("2025-03-01T17:00:00Z");
        assert!((peak - (0.55 + 2.19)).abs() < 1e-9);
        assert!((off - (0.135 + 0.55)).abs() < 1e-9);
        // Off-peak runs past midnight, until 00:30.
        assert!((at("2025-03-02T00:29:00Z") - off).abs() < 1e-12);
        assert!((at("2025-03-02T00:30:00Z") - peak).abs() < 1e-12);
        assert!((at("2025-09-10T17:00:00Z") - (0.56 + 1.68)).abs() < 1e-9);
    }

    #[test]
    fn unknown_model_is_unpriced_not_free() {
        let m = million(1, 1, 1);
        assert_eq!(shipped_cost("gpt-x", "2026-05-01T00:00:00Z", &m), None);
        // v4-pro has no price before 2026-04-24.
        assert_eq!(
            shipped_cost("deepseek-v4-pro", "2026-01-01T00:00:00Z", &m),
            None
        );
    }

    #[test]
    fn cache_write_defaults_to_the_miss_price() {
        let r = Rates {
            hit: 1.0,
            miss: 2.0,
            output: 3.0,
            write: None,
        };
        let t = Tokens {
            cache_write: 1_000_000,
            ..Tokens::default()
        };
        assert!((r.cost(&t) - 2.0).abs() < 1e-12);
    }

    #[test]
    fn user_file_overrides_and_adds_and_names_providers() {
        let mut t = PriceTable::shipped();
        t.add_text(
            r#"[{"model":"deepseek-v4-flash","from":"2026-04-26T12:15:00Z","hit":1,"miss":1,"output":1},
                {"model":"my-model","hit":2,"miss":2,"output":2},
                {"model":"deepseek-v4-flash","provider":"mine","hit":5,"miss":5,"output":5}]"#,
            "user",
        )
        .unwrap();
        let m = million(1_000_000, 0, 0);
        let at = ms("2026-05-01T00:00:00Z");
        assert_eq!(t.cost("deepseek-v4-flash", None, at, &m), Some(1.0));
        assert_eq!(
            t.cost("deepseek-v4-flash", Some("other"), at, &m),
            Some(1.0)
        );
        assert_eq!(t.cost("deepseek-v4-flash", Some("mine"), at, &m), Some(5.0));
        assert_eq!(t.cost("my-model", None, at, &m), Some(2.0));
        assert_eq!(t.prices().len(), 16);
    }

    #[test]
    fn bad_user_files_are_refused_with_the_reason() {
        let mut t = PriceTable::empty();
        let e = t
            .add_text(r#"[{"model":"m","hit":-1,"miss":1,"output":1}]"#, "f")
            .unwrap_err();
        assert!(e.to_string().contains("hit must be a price"), "{e}");
        let e = t
            .add_text(
                r#"[{"model":"m","from":"soon","hit":1,"miss":1,"output":1}]"#,
                "f",
            )
            .unwrap_err();
        assert!(e.to_string().contains("from \"soon\""), "{e}");
        assert!(t.add_text("{}", "f").is_err());
    }
}

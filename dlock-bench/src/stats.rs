//! Percentiles and rates.

use std::time::Duration;

/// Latency samples.
#[derive(Default, Clone, Debug)]
pub struct Samples(Vec<Duration>);

impl Samples {
    /// Adds one sample.
    pub fn push(&mut self, d: Duration) {
        self.0.push(d);
    }

    /// Adds all of `other`'s samples.
    pub fn extend(&mut self, other: Samples) {
        self.0.extend(other.0);
    }

    /// How many samples.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// `true` without samples.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The `p`-th percentile in milliseconds (nearest rank).
    #[must_use]
    pub fn percentile_ms(&self, p: f64) -> f64 {
        if self.0.is_empty() {
            return f64::NAN;
        }
        let mut v = self.0.clone();
        v.sort();
        let rank = ((p / 100.0) * (v.len() as f64)).ceil().max(1.0) as usize;
        v[rank.min(v.len()) - 1].as_secs_f64() * 1000.0
    }

    /// The distribution in milliseconds: the samples at `points` evenly spaced ranks
    /// from the smallest to the largest (empty without samples), for a CDF plot.
    #[must_use]
    pub fn quantiles_ms(&self, points: usize) -> Vec<f64> {
        if self.0.is_empty() || points < 2 {
            return Vec::new();
        }
        let mut v = self.0.clone();
        v.sort();
        let last = v.len() - 1;
        (0..points)
            .map(|i| v[i * last / (points - 1)].as_secs_f64() * 1000.0)
            .collect()
    }

    /// The largest sample in milliseconds.
    #[must_use]
    pub fn max_ms(&self) -> f64 {
        self.0
            .iter()
            .max()
            .map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0)
    }
}

// Reading Prometheus' text format (what /metrics answers) for the console's Live page.

// Prometheus text format: `name{label="value",...} number` lines.
export function parseMetrics(text) {
  const samples = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
    let l;
    while ((l = re.exec(m[2] || '')) !== null) labels[l[1]] = l[2];
    samples.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return samples;
}

export function sum(samples, name, where) {
  let total = 0;
  for (const s of samples) if (s.name === name && (!where || where(s.labels))) total += s.value;
  return total;
}

export function buckets(samples, name) {
  const byLe = new Map();
  for (const s of samples) {
    if (s.name !== name + '_bucket') continue;
    const le = s.labels.le === '+Inf' ? Infinity : Number(s.labels.le);
    byLe.set(le, (byLe.get(le) || 0) + s.value);
  }
  return [...byLe.entries()].sort((a, b) => a[0] - b[0]);
}

// The q-quantile of a cumulative histogram (linear within the bucket, as Prometheus does).
export function quantile(q, cumulative) {
  const total = cumulative.length ? cumulative[cumulative.length - 1][1] : 0;
  if (total <= 0) return null;
  const rank = q * total;
  let lowerLe = 0;
  let lowerCount = 0;
  for (const [le, count] of cumulative) {
    if (count >= rank) {
      if (le === Infinity) return lowerLe;
      const inBucket = count - lowerCount;
      return inBucket > 0 ? lowerLe + (le - lowerLe) * ((rank - lowerCount) / inBucket) : le;
    }
    lowerLe = le;
    lowerCount = count;
  }
  return lowerLe;
}

export function seconds(v) {
  if (v === null) return '–';
  return v < 1 ? (v * 1000).toFixed(v < 0.01 ? 2 : 1) + ' ms' : v.toFixed(2) + ' s';
}

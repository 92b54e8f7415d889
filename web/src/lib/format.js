// Formatting of quantities for display. Every function takes raw API values
// (MiB, milli-units, ratios, seconds, RFC 3339 times) and returns a string;
// a missing value (null/undefined/NaN) is shown as an em dash.

export const DASH = '—';

function missing(v) {
  return v === null || v === undefined || (typeof v === 'number' && !Number.isFinite(v));
}

function trim(n, digits) {
  // 1.50 -> "1.5", 2.00 -> "2"
  return Number(n.toFixed(digits)).toString();
}

export function formatBytes(bytes, digits = 1) {
  if (missing(bytes)) return DASH;
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let v = Number(bytes);
  let i = 0;
  const neg = v < 0;
  v = Math.abs(v);
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${neg ? '-' : ''}${i === 0 ? v : trim(v, digits)} ${units[i]}`;
}

export function formatMiB(mib, digits = 1) {
  if (missing(mib)) return DASH;
  return formatBytes(Number(mib) * 1024 * 1024, digits);
}

// A ratio (0.731) as a percentage ("73.1%").
export function formatPercent(ratio, digits = 1) {
  if (missing(ratio)) return DASH;
  return `${trim(Number(ratio) * 100, digits)}%`;
}

// The ratio part/total, guarded against a zero total.
export function ratio(part, total) {
  if (missing(part) || missing(total) || Number(total) === 0) return null;
  return Number(part) / Number(total);
}

// Milli-units (CPU millicores, milli-GPUs) as units: 2500 -> "2.5".
export function formatMilli(milli, digits = 2) {
  if (missing(milli)) return DASH;
  return trim(Number(milli) / 1000, digits);
}

// A locality id of a device (NUMA node, PCIe switch, fabric domain): the
// id, or an em dash where the API gives -1 (unknown, or in none).
export function formatLocality(id) {
  if (missing(id) || Number(id) < 0) return DASH;
  return String(id);
}

// Seconds as a short duration: "45s", "3m 5s", "2h 4m", "3d 1h".
export function formatDuration(seconds) {
  if (missing(seconds)) return DASH;
  let s = Math.max(0, Math.floor(Number(seconds)));
  const d = Math.floor(s / 86400);
  s -= d * 86400;
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  if (d) return h ? `${d}d ${h}h` : `${d}d`;
  if (h) return m ? `${h}h ${m}m` : `${h}h`;
  if (m) return s ? `${m}m ${s}s` : `${m}m`;
  return `${s}s`;
}

// The age of an RFC 3339 time relative to `now` (ms since the epoch).
export function formatAge(time, now = Date.now()) {
  if (!time) return DASH;
  const t = Date.parse(time);
  if (Number.isNaN(t)) return DASH;
  return formatDuration((now - t) / 1000);
}

// An RFC 3339 time as local "YYYY-MM-DD HH:MM:SS".
export function formatTime(time) {
  if (!time) return DASH;
  const d = new Date(time);
  if (Number.isNaN(d.getTime())) return DASH;
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

// GPU allocation of a preview summary, as a percentage.
export function formatUtilisation(summary) {
  if (!summary) return DASH;
  return formatPercent(summary.gpu_allocation);
}

// Fragmentation of a preview summary: the server calls it
// "gpu_fragmentation" (share of free GPU capacity stranded on partly used
// GPUs); "fragmentation" is accepted too. Absent: an em dash.
export function fragmentationOf(summary) {
  if (!summary) return null;
  for (const k of ['fragmentation', 'gpu_fragmentation']) {
    const v = summary[k];
    if (typeof v === 'number' && Number.isFinite(v)) return v;
  }
  return null;
}

export function formatFragmentation(summary) {
  return formatPercent(fragmentationOf(summary));
}

// A signed change in percentage points between two ratios: "+2.4 pp".
export function formatDeltaPoints(before, after, digits = 1) {
  if (missing(before) || missing(after)) return '';
  const d = (Number(after) - Number(before)) * 100;
  const s = trim(d, digits);
  if (Number(s) === 0) return '±0 pp';
  return `${d > 0 ? '+' : ''}${s} pp`;
}

export function formatScore(v, digits = 1) {
  if (missing(v)) return DASH;
  return trim(Number(v), digits);
}

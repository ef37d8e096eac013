// The console's building blocks: elements made from data as text only, and tables of rows.

export const $ = (id) => document.getElementById(id);

// A new element: `props` are assigned as properties (className, textContent, href, ...),
// `children` are nodes or strings (strings become text nodes).
export function el(tag, props, ...children) {
  const node = document.createElement(tag);
  if (props) {
    for (const [k, v] of Object.entries(props)) {
      if (k === 'dataset') {
        for (const [dk, dv] of Object.entries(v)) node.dataset[dk] = String(dv);
      } else {
        node[k] = v;
      }
    }
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
}

// Shown text of any JSON value.
export function show(value) {
  if (value === null || value === undefined) return '';
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

// A timestamp as the API gives it (RFC 3339 text, or Unix seconds / milliseconds).
export function when(value) {
  if (typeof value === 'number') {
    const ms = value > 1e12 ? value : value * 1000;
    const d = new Date(ms);
    return Number.isNaN(d.getTime()) ? String(value) : d.toISOString().replace('.000Z', 'Z');
  }
  return show(value);
}

// Fields holding a time: `received_at` (RFC 3339), `created_at_ms` (Unix milliseconds), `at`.
export function isTime(key) {
  return key === 'at' || key.endsWith('_at') || key.endsWith('_at_ms');
}

export function statusClass(status) {
  return 'status status-' + String(status || '').toLowerCase().replace(/[^a-z]/g, '');
}

export function setStatus(node, status) {
  node.textContent = show(status).toUpperCase();
  node.className = statusClass(status);
}

export function table(node, rows) {
  const head = node.tHead;
  const body = node.tBodies[0];
  clear(head);
  clear(body);
  if (rows && typeof rows === 'object' && !Array.isArray(rows)) rows = [rows];
  if (!Array.isArray(rows) || rows.length === 0) {
    body.append(el('tr', null, el('td', { className: 'muted' }, 'none')));
    return;
  }
  const columns = [];
  for (const row of rows) {
    for (const k of Object.keys(row || {})) if (!columns.includes(k)) columns.push(k);
  }
  head.append(el('tr', null, ...columns.map((c) => el('th', null, c))));
  for (const row of rows) {
    body.append(el('tr', null, ...columns.map((c) => {
      const v = row[c];
      if (c === 'status' || c.endsWith('_status')) return el('td', null, el('span', { className: statusClass(v) }, show(v).toUpperCase()));
      if (isTime(c)) return el('td', null, when(v));
      return el('td', null, show(v));
    })));
  }
}

export function pretty(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch (e) {
    return text;
  }
}

// The paper map: a canvas scatter plot of the papers' 2-D points, with keyword search, selection, similar-paper
// highlighting, abstract search and checkout, all through the service's JSON API.
const $ = (id) => document.getElementById(id);
const canvas = $('map');
const ctx = canvas.getContext('2d');
const PALETTE = [
  '#1f77b4',
  '#ff7f0e',
  '#2ca02c',
  '#d62728',
  '#9467bd',
  '#8c564b',
  '#e377c2',
  '#7f7f7f',
  '#bcbd22',
  '#17becf',
];

const state = { papers: [], byId: new Map(), selected: new Set(), results: new Map(), screen: [] };

function status(msg, isError = false) {
  $('status').textContent = msg;
  $('status').className = isError ? 'error' : '';
}

async function api(path, body) {
  const res = await fetch(
    path,
    body
      ? { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }
      : {},
  );
  if (res.status === 503) {
    status('service is loading papers…');
    await new Promise((r) => setTimeout(r, 1000));
    return api(path, body);
  }
  const data = res.headers.get('content-type')?.includes('json') ? await res.json() : await res.text();
  if (!res.ok) throw new Error(data.message ?? `HTTP ${res.status}`);
  return { data, res };
}

function colourOf(p) {
  const by = $('colour').value;
  if (by === 'Year') {
    const years = state.papers.map((q) => q.Year ?? 0).filter(Boolean);
    const lo = Math.min(...years);
    const hi = Math.max(...years);
    const t = hi > lo ? ((p.Year ?? lo) - lo) / (hi - lo) : 0.5;
    return `hsl(${240 - 200 * t} 70% 45%)`;
  }
  const values = state.categories[by] ?? [];
  const i = values.indexOf(p[by] ?? '');
  return values.length <= PALETTE.length ? PALETTE[i] : `hsl(${(i * 137.5) % 360} 65% 45%)`;
}

function legend() {
  const by = $('colour').value;
  const el = $('legend');
  el.innerHTML = '';
  if (by === 'Year') {
    const years = state.papers.map((q) => q.Year).filter(Boolean);
    el.innerHTML = `<span style="--c:hsl(240 70% 45%)">${Math.min(...years)}</span><span style="--c:hsl(40 70% 45%)">${Math.max(...years)}</span>`;
    return;
  }
  for (const s of state.categories[by]) {
    const span = document.createElement('span');
    span.style.setProperty('--c', colourOf({ [by]: s }));
    span.textContent = s;
    el.append(span);
  }
}

function draw() {
  const key = `${$('embedding').value}_umap`;
  const pts = state.papers.map((p) => p[key]);
  const xs = pts.map((p) => p[0]);
  const ys = pts.map((p) => p[1]);
  const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  const pad = 20;
  const sx = (canvas.width - 2 * pad) / (x1 - x0 || 1);
  const sy = (canvas.height - 2 * pad) / (y1 - y0 || 1);
  state.screen = pts.map(([x, y]) => [pad + (x - x0) * sx, canvas.height - pad - (y - y0) * sy]);
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  const focus = state.results.size > 0;
  const order = state.papers.map((_, i) => i).sort((a, b) => rankOf(a) - rankOf(b));
  for (const i of order) {
    const p = state.papers[i];
    const [x, y] = state.screen[i];
    const hit = state.results.has(p.ID);
    const sel = state.selected.has(p.ID);
    ctx.globalAlpha = focus && !hit && !sel ? 0.18 : 0.9;
    ctx.beginPath();
    ctx.arc(x, y, hit || sel ? 6 : 3.5, 0, 2 * Math.PI);
    ctx.fillStyle = colourOf(p);
    ctx.fill();
    if (hit || sel) {
      ctx.lineWidth = sel ? 3 : 1.5;
      ctx.strokeStyle = sel ? '#000' : '#333';
      ctx.stroke();
    }
  }
  ctx.globalAlpha = 1;
  function rankOf(i) {
    const id = state.papers[i].ID;
    return state.selected.has(id) ? 2 : state.results.has(id) ? 1 : 0;
  }
}

function paperItem(p, extra = '') {
  const li = document.createElement('li');
  li.dataset.id = p.ID;
  li.innerHTML = `<div class="title"></div><div class="meta"></div>`;
  li.querySelector('.title').textContent = p.Title;
  li.querySelector('.meta').textContent = `${p.ID} · ${p.Source} ${p.Year ?? ''} · ${p.Keywords.join(', ')}`;
  if (extra) {
    const s = document.createElement('span');
    s.className = 'score';
    s.textContent = ` ${extra}`;
    li.querySelector('.title').append(s);
  }
  li.addEventListener('click', () => toggle(p.ID));
  return li;
}

function renderSelected() {
  const ul = $('selected');
  ul.innerHTML = '';
  for (const id of state.selected) ul.append(paperItem(state.byId.get(id)));
  $('selected-count').textContent = `(${state.selected.size})`;
  $('similar-btn').disabled = $('checkout-btn').disabled = state.selected.size === 0;
  draw();
}

function showResults(title, data) {
  state.results = new Map(data.results.map((r) => [r.ID, r]));
  $('results-title').textContent = `${title}: ${data.count} paper${data.count === 1 ? '' : 's'}`;
  const ol = $('results');
  ol.innerHTML = '';
  for (const r of data.results) ol.append(paperItem(r, `similarity ${r.similarity.toFixed(3)}`));
  if (data.not_found?.length) status(`not found: ${data.not_found.join(', ')}`, true);
  else status(`${data.count} result${data.count === 1 ? '' : 's'}`);
  draw();
}

function toggle(id) {
  if (state.selected.has(id)) state.selected.delete(id);
  else state.selected.add(id);
  renderSelected();
}

function nearest(ev) {
  const r = canvas.getBoundingClientRect();
  const mx = ((ev.clientX - r.left) * canvas.width) / r.width;
  const my = ((ev.clientY - r.top) * canvas.height) / r.height;
  let best = -1;
  let bd = 100;
  state.screen.forEach(([x, y], i) => {
    const d = (x - mx) ** 2 + (y - my) ** 2;
    if (d < bd) [best, bd] = [i, d];
  });
  return best;
}

canvas.addEventListener('click', (ev) => {
  const i = nearest(ev);
  if (i >= 0) toggle(state.papers[i].ID);
});
canvas.addEventListener('mousemove', (ev) => {
  const i = nearest(ev);
  const tip = $('tooltip');
  tip.hidden = i < 0;
  if (i < 0) return;
  const p = state.papers[i];
  tip.textContent = `${p.Title} (${p.Source} ${p.Year ?? ''})`;
  const r = canvas.getBoundingClientRect();
  tip.style.left = `${ev.clientX - r.left + 12}px`;
  tip.style.top = `${ev.clientY - r.top + 12}px`;
});
canvas.addEventListener('mouseleave', () => ($('tooltip').hidden = true));

$('keyword-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const words = $('keyword-input')
    .value.split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (!words.length) return;
  try {
    const { data } = await api('/getSimilarPapersByKeyword', {
      input_data: words,
      limit: Number($('keyword-limit').value),
    });
    showResults(`Keyword “${words.join(', ')}”`, data);
  } catch (e) {
    status(e.message, true);
  }
});

$('similar-btn').addEventListener('click', async () => {
  try {
    const { data } = await api('/getSimilarPapers', {
      input_data: [...state.selected],
      input_type: 'ID',
      limit: Number($('similar-limit').value),
      embedding: $('embedding').value,
      dimensions: $('dimensions').value,
    });
    showResults(`Similar (${$('embedding').value}, ${$('dimensions').value})`, data);
  } catch (e) {
    status(e.message, true);
  }
});

$('abstract-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  try {
    const { data } = await api('/getSimilarPapersByAbstract', {
      input_data: { title: $('abstract-title').value, abstract: $('abstract-text').value },
      limit: Number($('similar-limit').value),
    });
    showResults('Similar to the abstract (specter)', data);
  } catch (e) {
    status(e.message, true);
  }
});

$('checkout-btn').addEventListener('click', async () => {
  try {
    const { data } = await api('/checkoutPapers', { input_data: [...state.selected], input_type: 'ID' });
    const blob = new Blob([JSON.stringify(data, null, 2)], { type: 'application/json' });
    const a = document.createElement('a');
    a.href = URL.createObjectURL(blob);
    a.download = 'papers.json';
    document.body.append(a);
    a.click();
    a.remove();
    status(`checked out ${data.length} paper${data.length === 1 ? '' : 's'}`);
  } catch (e) {
    status(e.message, true);
  }
});

$('clear-btn').addEventListener('click', () => {
  state.selected.clear();
  state.results.clear();
  $('results').innerHTML = '';
  $('results-title').textContent = 'Results';
  renderSelected();
});
$('embedding').addEventListener('change', draw);
$('colour').addEventListener('change', () => {
  legend();
  draw();
});

(async () => {
  try {
    const { data } = await api('/getPapers');
    state.papers = data.papers;
    state.byId = new Map(data.papers.map((p) => [p.ID, p]));
    state.categories = Object.fromEntries(
      ['Topic', 'Source'].map((k) => [k, [...new Set(data.papers.map((p) => p[k] ?? ''))].sort()]),
    );
    // Data without a Topic field: colour by venue.
    if (state.categories.Topic.length <= 1) {
      $('colour').querySelector('option[value=Topic]').remove();
      $('colour').value = 'Source';
    }
    const kws = [...new Set(data.papers.flatMap((p) => p.Keywords.map((k) => k.toLowerCase())))].sort();
    $('keyword-list').innerHTML = kws.map((k) => `<option value="${k.replace(/"/g, '&quot;')}">`).join('');
    legend();
    draw();
    status(`${data.count} papers`);
    document.body.dataset.ready = 'true';
  } catch (e) {
    status(e.message, true);
  }
})();

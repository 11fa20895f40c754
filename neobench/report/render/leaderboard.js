// The leaderboard page's script (`neobench table --html`). It lays out the data embedded in
// the page (neobench/report/page.py computed every number: scores, intervals, marks, pairs,
// ranks and letter groups) and never computes a statistic itself: it sorts, filters, draws
// whiskers on a column's own range, and keeps the view in the URL hash so that a link reopens
// it.
// Plain ES2020, no framework, no request: the page works from file:// offline.
"use strict";
(() => {
  const DATA = JSON.parse(document.getElementById("page-data").textContent);
  // "types": MTEB's Table 4 (type columns, tasks in the drill-down); "tasks": GLUE's table, a
  // column per task (report/glue_page.py), no task types and no zero-shot view.
  const BY_TASK = DATA.layout === "tasks";
  const AVG = "Avg.";
  const MEAN = "Mean(TaskType)";
  const UP = "▲";
  const DOWN = "▼";
  const TASK_TYPE = Object.fromEntries(DATA.tasks.map(([name, type]) => [name, type]));
  const TASK_INDEX = Object.fromEntries(DATA.tasks.map(([name], i) => [name, i]));
  const ROW = Object.fromEntries(DATA.rows.map((row) => [row.label, row]));
  const ROW_KINDS = [
    ["all", "All rows"],
    ["computed", "Computed here"],
    ["finetuned", "Fine-tuned by neobench"],
    ["given", "Not fine-tuned (evaluated as given)"],
    ["quoted", "Quoted (paper)"],
  ];
  const DEFAULTS = { sort: "", dir: "desc", type: "", task: "", rows: "all", zs: "0",
    open: "", a: "", b: "" };
  const state = { ...DEFAULTS };

  // ---------------------------------------------------------------- small helpers

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") el.className = value;
      else if (key === "text") el.textContent = value;
      else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
      else el.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  function svg(tag, attrs) {
    const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, value);
    return el;
  }

  const fixed = (x, digits = 1) => (x === null || x === undefined ? "—" : x.toFixed(digits));
  const signed = (x, digits = 1) => (x >= 0 ? "+" : "") + x.toFixed(digits);
  const half = (cell) => (cell.lo === undefined ? null : (cell.hi - cell.lo) / 2);
  const short = (text, n = 12) => (text && text.length > n ? text.slice(0, n) : text);
  const safeId = (text) => text.replace(/[^A-Za-z0-9_-]/g, "_");

  function view() {
    const zs = DATA.views.zero_shot;
    return state.zs === "1" && zs && !zs.refused ? zs : DATA.views.all;
  }

  // ---------------------------------------------------------------- the URL hash

  function readHash() {
    const params = new URLSearchParams(location.hash.slice(1));
    for (const key of Object.keys(DEFAULTS)) state[key] = params.get(key) ?? DEFAULTS[key];
    if (state.task && !(state.task in TASK_TYPE)) state.task = "";
    if (state.type && !DATA.types.some(([t]) => t === state.type)) state.type = "";
  }

  function writeHash() {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(state)) {
      if (value !== DEFAULTS[key]) params.set(key, value);
    }
    const hash = "#" + params.toString();
    // location.replace: a same-document move that adds no history entry (pushState is
    // refused on some file:// pages).
    if (hash !== location.hash && !(hash === "#" && !location.hash)) location.replace(hash);
  }

  function update(changes) {
    Object.assign(state, changes);
    writeHash();
    render();
  }

  // ---------------------------------------------------------------- columns and rows

  function columns(v) {
    const cols = [
      { key: "model", label: "Model", kind: "model", title: "Row: a model under one set of " +
        "evaluation conditions (seed replicates as one row). ▸ opens its tasks." },
      { key: "rank", label: "Rank", kind: "rank", title: "Rank on Avg. [95% interval]: 1 + the " +
        "rows significantly above to N − the rows significantly below (paired tests between " +
        "every two rows, Holm; neobench table --ranks); — = quoted, or no test." },
      { key: "group", label: "Group", kind: "group", title: "Letter groups on Avg.: rows " +
        "sharing a letter are not significantly different; rows without a common letter are." },
    ];
    const types = Object.fromEntries(v.types.map(([t, s, n]) => [t, [s, n]]));
    const typeCol = (t) => ({ key: t, label: `${types[t][0]} (${types[t][1]})`, kind: "type",
      title: `${t}: mean over its ${types[t][1]} tasks of this view` });
    // A task's header may break where its name's words meet (CQADupstack|Retrieval).
    const taskCol = (t) => ({ key: t, label: t.replace(/([a-z0-9])([A-Z])/g, "$1\u200b$2"),
      kind: "task", title: `${t} (${TASK_TYPE[t]})` });
    const avgCol = { key: AVG, label: AVG, kind: "avg", title: BY_TASK ? "Mean over the " +
      "averaged tasks (WNLI never, following BERT; as the paper's GLUE table)" : "Mean over " +
      "the tasks (as the paper computes it, not the mean of the type means)" };
    const missingCol = { key: "missing", label: "Missing", kind: "missing",
      title: "Tasks of the table this row has no result for" };
    if (BY_TASK) {
      const shown = state.task && v.tasks.includes(state.task) ? [state.task] : v.tasks;
      for (const t of shown) cols.push(taskCol(t));
      cols.push(avgCol);
      if (!state.task) cols.push(missingCol);
      return cols;
    }
    if (state.task && v.tasks.includes(state.task)) {
      cols.push(taskCol(state.task), avgCol);
    } else if (state.type && types[state.type]) {
      cols.push(typeCol(state.type));
      // The type's tasks that a row of the view holds (a column of dashes says nothing).
      for (const t of v.tasks) if (TASK_TYPE[t] === state.type && held(v, t)) cols.push(taskCol(t));
      cols.push(avgCol);
    } else {
      for (const [t] of v.types) cols.push(typeCol(t));
      // A break after "(" lets the long name wrap in a narrow header.
      cols.push(avgCol, { key: MEAN, label: "Mean(\u200bTaskType)", kind: "mean",
        title: "Mean of the type " +
        "columns (empty unless every type is complete)" });
      cols.push({ key: "zs", label: "Zero-shot", kind: "zs", title: "mteb's zero-shot " +
        "percentage over the tasks of this view (unknown: training data not declared)" });
      cols.push({ ...missingCol, title: "Tasks of the benchmark this row has no result for" });
    }
    return cols;
  }

  function held(v, task) {
    const i = v.tasks.indexOf(task);
    return Object.values(v.rows).some((row) => row.tasks && row.tasks[i]);
  }

  function cellOf(v, label, col) {
    const row = v.rows[label];
    if (!row) return null;
    if (col.kind === "task") {
      const i = v.tasks.indexOf(col.key);
      return (row.tasks && row.tasks[i]) || null;
    }
    const cell = row.cells[col.key];
    return cell && cell.v !== undefined ? cell : null;
  }

  function sortValue(v, label, col) {
    if (col.kind === "model") return ROW[label].name.toLowerCase();
    if (col.kind === "rank") return v.ranks[label] ? v.ranks[label].rank : null;
    if (col.kind === "group") return v.ranks[label] ? v.ranks[label].group : null;
    if (col.kind === "zs") {
      const text = v.rows[label].zero_shot;
      return text && text.endsWith("%") ? parseFloat(text) : null;
    }
    if (col.kind === "missing") return v.rows[label].missing;
    const cell = cellOf(v, label, col);
    return cell ? cell.v : null;
  }

  function shownRows(v, cols) {
    let labels = DATA.rows.map((r) => r.label).filter((label) => label in v.rows);
    labels = labels.filter((label) => {
      const row = ROW[label];
      if (state.rows === "computed") return !row.quoted;
      if (state.rows === "finetuned") return !row.quoted && row.finetuned;
      if (state.rows === "given") return !row.quoted && !row.finetuned;
      if (state.rows === "quoted") return row.quoted;
      return true;
    });
    const col = cols.find((c) => c.key === state.sort);
    if (!col) return labels;
    const sign = state.dir === "asc" ? 1 : -1;
    const order = new Map(labels.map((label, i) => [label, i]));
    return labels.slice().sort((a, b) => {
      const x = sortValue(v, a, col);
      const y = sortValue(v, b, col);
      if (x === null || y === null) {
        return (x === null) - (y === null) || order.get(a) - order.get(b); // empty cells last
      }
      if (x < y) return -sign;
      if (x > y) return sign;
      return order.get(a) - order.get(b);
    });
  }

  // ---------------------------------------------------------------- the table

  function header(cols) {
    const tr = h("tr");
    for (const col of cols) {
      const sorted = state.sort === col.key;
      const dir = sorted ? (state.dir === "asc" ? "ascending" : "descending") : "none";
      const glyph = sorted ? (state.dir === "asc" ? " ↑" : " ↓") : "";
      const button = h("button", { type: "button", class: "sort", title: col.title,
        "data-key": `sort:${col.key}`, onclick: () => sortBy(col.key) },
      col.label, h("span", { class: "dir", "aria-hidden": "true", text: glyph }));
      tr.append(h("th", { scope: "col", "aria-sort": dir, class: `c-${col.kind}` }, button));
    }
    return tr;
  }

  function sortBy(key) {
    // First press: best first (high to low; groups and names: ascending); second: reversed.
    const natural = ["rank", "group", "model", "missing"].includes(key) ? "asc" : "desc";
    const dir = state.sort === key ? (state.dir === "asc" ? "desc" : "asc") : natural;
    update({ sort: key, dir });
  }

  function ranges(v, labels, cols) {
    // Each column's span over the rows shown, for its whiskers: layout, not statistics.
    const out = {};
    for (const col of cols) {
      let low = Infinity;
      let high = -Infinity;
      for (const label of labels) {
        const cell = cellOf(v, label, col);
        if (!cell || col.kind === "zs" || col.kind === "missing") continue;
        low = Math.min(low, cell.lo ?? cell.v);
        high = Math.max(high, cell.hi ?? cell.v);
      }
      if (low < high) out[col.key] = [low, high];
    }
    return out;
  }

  function whisker(cell, span) {
    if (!span || cell.lo === undefined) return null;
    const [low, high] = span;
    const x = (value) => `${2 + (96 * (value - low)) / (high - low)}%`;
    const box = svg("svg", { class: "whisker", "aria-hidden": "true" });
    box.append(svg("line", { x1: x(cell.lo), x2: x(cell.hi), y1: 4, y2: 4 }));
    box.append(svg("line", { x1: x(cell.lo), x2: x(cell.lo), y1: 1, y2: 7 }));
    box.append(svg("line", { x1: x(cell.hi), x2: x(cell.hi), y1: 1, y2: 7 }));
    box.append(svg("circle", { cx: x(cell.v), cy: 4, r: 2.2 }));
    return box;
  }

  function markText(mark) {
    if (mark === UP) return `significantly above the baseline (${DATA.baseline})`;
    if (mark === DOWN) return `significantly below the baseline (${DATA.baseline})`;
    return "";
  }

  function scoreCell(v, label, col, span) {
    const cell = cellOf(v, label, col);
    if (!cell) return h("td", { class: "num empty" }, "—");
    const width = half(cell);
    const of = cell.of ? ` (${cell.of[0]}/${cell.of[1]})` : "";
    const content = h("button", { type: "button", class: "cell",
      title: provenanceText(v, label, col, cell), "data-key": `cell:${label}:${col.key}`,
      onclick: (event) => openProvenance(event, v, label, col, cell) },
    h("span", { class: "v" }, fixed(cell.v), cell.d ? "†" : ""),
    width === null ? null : h("span", { class: "pm" }, ` ±${fixed(width)}`),
    cell.m ? h("span", { class: `mark ${cell.m === UP ? "up" : "down"}`,
      "aria-label": markText(cell.m), title: markText(cell.m) }, ` ${cell.m}`) : null,
    // The seed sd and a partial cell's task count on a line of their own, smaller.
    cell.sd === undefined && !of ? null : h("span", { class: "sub" },
      [cell.sd === undefined ? "" : `sd ${fixed(cell.sd)}`, of.trim()].filter(Boolean).join(" ")));
    return h("td", { class: "num" }, content, whisker(cell, span));
  }

  function modelCell(v, label) {
    const row = ROW[label];
    const open = state.open === label;
    const toggle = row.quoted ? null : h("button", { type: "button", class: "drill",
      "aria-expanded": String(open), "aria-controls": `detail-${safeId(label)}`,
      "data-key": `drill:${label}`, title: "Per-task scores, intervals and seeds",
      onclick: () => update({ open: open ? "" : label }) }, open ? "▾" : "▸");
    const badge = row.quoted ? h("span", { class: "badge", title: row.source }, "quoted") : null;
    return h("th", { scope: "row", class: "model" }, toggle,
      h("span", { class: "name", title: row.source }, row.name), badge);
  }

  function otherCell(v, label, col) {
    const row = v.rows[label];
    const rank = v.ranks[label];
    if (col.kind === "rank") {
      if (!rank) return h("td", { class: "num rank", title: "no rank" }, "—");
      const span = rank.lo === rank.hi ? String(rank.lo) : `${rank.lo}–${rank.hi}`;
      // best: alone at the top, significantly above every other row
      const best = rank.hi === 1 && v.computed.length > 1;
      return h("td", { class: "num rank", title: `rank ${rank.rank}, 95% interval ${span}` },
        `${rank.rank} [${span}]`, best ? h("span", { class: "best" }, " best") : null);
    }
    if (col.kind === "group") {
      return h("td", { class: "group", title: rank ? `letter group ${rank.group}` : "no group" },
        rank ? rank.group : "—");
    }
    if (col.kind === "zs") return h("td", { class: "num" }, row.zero_shot || "");
    return h("td", { class: "num" }, row.missing ? String(row.missing) : "");
  }

  function renderBoard() {
    const v = view();
    const cols = columns(v);
    const labels = shownRows(v, cols);
    const spans = ranges(v, labels, cols);
    const table = document.getElementById("board");
    table.tHead.replaceChildren(header(cols));
    const body = [];
    for (const label of labels) {
      const tr = h("tr", { class: ROW[label].quoted ? "quoted" : "", "data-label": label });
      for (const col of cols) {
        if (col.kind === "model") tr.append(modelCell(v, label));
        else if (["rank", "group", "zs", "missing"].includes(col.kind)) {
          tr.append(otherCell(v, label, col));
        }
        else tr.append(scoreCell(v, label, col, spans[col.key]));
      }
      body.push(tr);
      if (state.open === label) body.push(detailRow(v, label, cols.length));
    }
    table.tBodies[0].replaceChildren(...body);
    const hidden = DATA.rows.length - labels.length;
    const sorted = cols.find((c) => c.key === state.sort);
    document.getElementById("board-caption").textContent = `${DATA.benchmark}: ` +
      `${labels.length} rows` + (hidden ? ` (${hidden} not shown in this view)` : "") +
      (sorted ? `, sorted by ${sorted.label} ${state.dir === "asc" ? "ascending" :
        "descending"}` : ", in table order");
    return { v, cols, labels };
  }

  // ---------------------------------------------------------------- the drill-down

  function detailRow(v, label, span) {
    const row = ROW[label];
    const cells = v.rows[label].tasks || [];
    // The row's tasks (those it holds) under the type and task filters.
    const tasks = v.tasks.filter((t, i) => cells[i] && (!state.type || TASK_TYPE[t] ===
      state.type) && (!state.task || t === state.task));
    let low = Infinity;
    let high = -Infinity;
    for (const t of tasks) {
      const cell = cells[v.tasks.indexOf(t)];
      if (!cell) continue;
      const seeds = row.seeds ? row.seeds[TASK_INDEX[t]].filter((x) => x !== null) : [];
      low = Math.min(low, cell.lo ?? cell.v, ...seeds);
      high = Math.max(high, cell.hi ?? cell.v, ...seeds);
    }
    const list = h("table", { class: "detail-table" },
      h("thead", {}, h("tr", {}, ["Task", BY_TASK ? "Metric" : "Type", "Score",
        "95% interval, seeds as dots", "sd", "▲▼"].map((text, i) => h("th", { scope: "col", class: i === 1 ? "c-type" :
        i === 3 ? "c-plot" : "" }, text)))));
    const body = h("tbody");
    for (const t of tasks) {
      const cell = cells[v.tasks.indexOf(t)];
      const seeds = row.seeds ? row.seeds[TASK_INDEX[t]] : null;
      body.append(h("tr", {},
        h("th", { scope: "row" }, t),
        h("td", { class: "c-type" }, TASK_TYPE[t]),
        h("td", { class: "num" }, cell ? `${fixed(cell.v)}${cell.d ? "†" : ""}` +
          (half(cell) === null ? "" : ` ±${fixed(half(cell))}`) : "—"),
        h("td", { class: "plot" }, cell ? seedPlot(cell, seeds, low, high) : null),
        h("td", { class: "num" }, cell && cell.sd !== undefined ? fixed(cell.sd) : ""),
        h("td", { class: "num" }, cell && cell.m ? h("span", { class: `mark ${cell.m === UP ?
          "up" : "down"}`, "aria-label": markText(cell.m) }, cell.m) : "")));
    }
    list.append(body);
    const members = (row.members || []).map((m) => `${m.seed === null ? "" : `seed ${m.seed}: `}` +
      `${m.revision}`).join("; ");
    const box = h("div", { class: "detail-box" },
      h("p", { class: "detail-head" }, h("strong", {}, row.name),
        ` · ${tasks.length} tasks` + (members ? ` · ${members}` : "")),
      h("div", { class: "scroll" }, list));
    return h("tr", { class: "detail", id: `detail-${safeId(label)}` },
      h("td", { colspan: span }, box));
  }

  function seedPlot(cell, seeds, low, high) {
    if (!(low < high)) return null;
    const x = (value) => `${2 + (96 * (value - low)) / (high - low)}%`;
    const box = svg("svg", { class: "seedplot", role: "img" });
    const named = [`${fixed(cell.v)}`];
    if (cell.lo !== undefined) {
      box.append(svg("line", { x1: x(cell.lo), x2: x(cell.hi), y1: 7, y2: 7, class: "ci" }));
      named.push(`interval ${fixed(cell.lo)} to ${fixed(cell.hi)}`);
    }
    box.append(svg("line", { x1: x(cell.v), x2: x(cell.v), y1: 1, y2: 13, class: "pt" }));
    for (const seed of seeds || []) {
      if (seed === null) continue;
      box.append(svg("circle", { cx: x(seed), cy: 7, r: 3, class: "seed" }));
    }
    if (seeds) {
      named.push(`seeds ${seeds.filter((s) => s !== null).map((s) => fixed(s)).join(", ")}`);
    }
    box.setAttribute("aria-label", named.join("; "));
    return box;
  }

  // ---------------------------------------------------------------- provenance

  function provenanceLines(v, label, col, cell) {
    const row = ROW[label];
    if (row.quoted) return [["quoted", row.source], ["value", fixed(cell.v)]];
    if (BY_TASK) return glueProvenance(row, col, cell);
    const c = row.conditions;
    const lines = [["model", row.model]];
    const index = col.kind === "task" ? TASK_INDEX[col.key] : null;
    for (const m of row.members) {
      const dates = Object.entries(m.dates);
      const when = index === null ? dates.map(([d]) => d).join(", ")
        : (dates.find(([, tasks]) => tasks.includes(index)) || ["unknown"])[0];
      lines.push([m.seed === null ? "revision" : `seed ${m.seed}`,
        `${m.revision} · evaluated ${when || "unknown"}`]);
    }
    lines.push(["recipe", c.recipe], ["instructions", `${c.instructions} (sha256 ` +
      `${short(c.instructions_sha256)})`], ["dtype", c.dtype], ["max length", c.max_seq_length],
    ["mteb", c.mteb], ["benchmark", c.benchmark]);
    lines.push([col.label, cellText(cell)]);
    return lines;
  }

  function cellText(cell) {
    const parts = [fixed(cell.v)];
    if (cell.lo !== undefined) parts.push(`95% interval [${fixed(cell.lo)}, ${fixed(cell.hi)}]`);
    if (cell.sd !== undefined) parts.push(`seed sd ${fixed(cell.sd)}`);
    if (cell.m) parts.push(markText(cell.m));
    if (cell.d) parts.push("† in-domain: the model trained on this task (or one it averages)");
    return parts.join("; ");
  }

  function glueProvenance(row, col, cell) {
    // A GLUE cell: the model folder, the grid point chosen for the task (or the tasks Avg.
    // averages), its seeds and run folders, the recorded conditions.
    const g = row.glue;
    const lines = [["model", row.model], ["revision", g.revision], ["folder", g.folder]];
    const chosen = col.kind === "task" ? [col.key] : Object.keys(g.tasks);
    for (const task of chosen) {
      const t = g.tasks[task];
      if (!t) continue;
      const selection = t.selection === null ? "" : `, selection score ${fixed(t.selection)}`;
      lines.push([`${task} point`, `${t.point} (of ${t.points}${selection}; seeds ` +
        `${t.seeds.join(", ")})`]);
      if (col.kind === "task") lines.push(["runs", t.folders.join(", ")]);
    }
    for (const [key, value] of Object.entries(row.conditions)) {
      lines.push([key.replace(/_/g, " "), value === null ? "—" : String(value)]);
    }
    lines.push([col.label, cellText(cell)]);
    return lines;
  }

  function provenanceText(v, label, col, cell) {
    return [ROW[label].name, ...provenanceLines(v, label, col, cell).map(([k, x]) => `${k}: ${x}`)]
      .join("\n");
  }

  function openProvenance(event, v, label, col, cell) {
    const box = document.getElementById("prov");
    document.getElementById("prov-title").textContent = `${ROW[label].name} · ${col.label}`;
    const list = document.getElementById("prov-body");
    list.replaceChildren(...provenanceLines(v, label, col, cell).flatMap(([key, value]) =>
      [h("dt", {}, key), h("dd", {}, String(value))]));
    box.hidden = false;
    const rect = event.currentTarget.getBoundingClientRect();
    const width = Math.min(420, window.innerWidth - 16);
    box.style.width = `${width}px`;
    box.style.left = `${Math.max(8, Math.min(rect.left, window.innerWidth - width - 8))}px`;
    box.style.top = `${window.scrollY + rect.bottom + 6}px`;
    box.dataset.opener = event.currentTarget.dataset.key;
    document.getElementById("prov-close").focus();
  }

  function closeProvenance() {
    const box = document.getElementById("prov");
    if (box.hidden) return;
    box.hidden = true;
    const opener = document.querySelector(`[data-key="${CSS.escape(box.dataset.opener || "")}"]`);
    if (opener) opener.focus();
  }

  // ---------------------------------------------------------------- A/B

  function renderAB() {
    const v = view();
    const pickA = document.getElementById("ab-a");
    const pickB = document.getElementById("ab-b");
    const options = () => v.computed.map((label) => h("option", { value: label }, ROW[label].name));
    pickA.replaceChildren(...options());
    pickB.replaceChildren(...options());
    const table = document.getElementById("ab-table");
    const notes = document.getElementById("ab-notes");
    const command = document.getElementById("ab-command");
    if (v.computed.length < 2) {
      table.tHead.replaceChildren();
      table.tBodies[0].replaceChildren();
      command.textContent = "A/B needs two computed rows.";
      notes.replaceChildren();
      return;
    }
    const a = v.computed.includes(state.a) ? state.a : (v.computed.includes(DATA.baseline) ?
      DATA.baseline : v.computed[0]);
    const b = v.computed.includes(state.b) && state.b !== a ? state.b :
      v.computed.find((label) => label !== a);
    pickA.value = a;
    pickB.value = b;
    const pair = v.pairs[`${v.computed.indexOf(a)}-${v.computed.indexOf(b)}`];
    // Quoted for a POSIX shell by page.py (shlex): a name may hold a quote or a space.
    // GLUE's pairs are `table --glue --baseline`'s tests, whose rows must include the baseline.
    const models = BY_TASK ? `${ROW[a].shell},${ROW[b].shell}` : ROW[b].shell;
    command.replaceChildren(BY_TASK ? "The marks of " : "The rows of ", h("code", {},
      `${DATA.compare_command} --baseline ${ROW[a].shell} --models ${models}` +
      (v === DATA.views.all ? "" : " (over this view's tasks)")),
    v === DATA.views.all ? "" : ": the zero-shot view compares on the tasks no row of " +
      "the view trained on; compare --zero-shot-only drops only those A or B trained on.");
    if (!pair || pair.refused) {
      table.tHead.replaceChildren();
      table.tBodies[0].replaceChildren(h("tr", {}, h("td", { class: "refused" },
        `compare refuses this pair: ${pair ? pair.refused : "no data"}`)));
      notes.replaceChildren();
      return;
    }
    abTable(table, pair, a, b);
    notes.replaceChildren(...pair.notes.map((note) => h("li", {}, note)));
  }

  function abTable(table, pair, a, b) {
    const field = Object.fromEntries(DATA.pair_fields.map((name, i) => [name, i]));
    table.tHead.replaceChildren(h("tr", {}, ["Task", "A", "B", "B − A [95% CI]", "p",
      "p (Holm)", "", "Δ around 0"].map((text, i) => h("th", { scope: "col",
      class: i === 7 ? "c-plot" : "" }, text))));
    const shown = pair.tasks.map((task, i) => [task, i]).filter(([task]) => task === AVG ||
      ((!state.type || TASK_TYPE[task] === state.type) && (!state.task || task === state.task)));
    let reach = 0;
    for (const [, i] of shown) {
      const r = pair.rows[i];
      reach = Math.max(reach, Math.abs(r[field.ci_low]), Math.abs(r[field.ci_high]));
    }
    const body = shown.map(([task, i]) => {
      const r = pair.rows[i];
      const pct = (name) => 100 * r[field[name]];
      const significant = pair.significant[i] === 1;
      const mark = significant ? (r[field.delta] > 0 ? UP : DOWN) : "";
      const words = significant ? (r[field.delta] > 0 ? "B higher" : "B lower") : "";
      return h("tr", { class: task === AVG ? "avg" : "", "data-task": task },
        h("th", { scope: "row" }, task),
        h("td", { class: "num" }, fixed(pct("baseline_score"))),
        h("td", { class: "num" }, fixed(pct("score")) + (pair.in_domain[i] ? "†" : "")),
        h("td", { class: "num delta", "data-delta": String(r[field.delta]) },
          `${signed(pct("delta"))} [${signed(pct("ci_low"))}, ${signed(pct("ci_high"))}]`),
        h("td", { class: "num" }, r[field.p].toFixed(3)),
        h("td", { class: "num" }, r[field.p_holm].toFixed(3)),
        h("td", { class: "num" }, mark ? h("span", { class: `mark ${mark === UP ? "up" : "down"}`,
          title: words }, `${mark} ${words}`) : ""),
        h("td", { class: "plot" }, deltaPlot(pct("delta"), pct("ci_low"), pct("ci_high"),
          100 * reach)));
    });
    table.tBodies[0].replaceChildren(...body);
  }

  function deltaPlot(delta, low, high, reach) {
    if (!(reach > 0)) return null;
    const x = (value) => `${50 + (48 * value) / reach}%`;
    const box = svg("svg", { class: "seedplot", "aria-hidden": "true" });
    box.append(svg("line", { x1: "50%", x2: "50%", y1: 0, y2: 14, class: "zero" }));
    box.append(svg("line", { x1: x(low), x2: x(high), y1: 7, y2: 7, class: "ci" }));
    box.append(svg("line", { x1: x(delta), x2: x(delta), y1: 1, y2: 13, class: "pt" }));
    return box;
  }

  // ---------------------------------------------------------------- downloads

  function currentView() {
    const v = view();
    const cols = columns(v);
    const scores = cols.filter((c) => ["type", "task", "avg", "mean"].includes(c.kind));
    return { v, scores, labels: shownRows(v, cols) };
  }

  function download(name, type, text) {
    const link = h("a", { href: URL.createObjectURL(new Blob([text], { type })),
      download: name });
    document.body.append(link);
    link.click();
    link.remove();
  }

  function csvText() {
    const { v, scores, labels } = currentView();
    const quote = (x) => (/[",\n]/.test(String(x)) ? `"${String(x).replace(/"/g, '""')}"` : x);
    const head = ["model", "quoted", "rank", "rank_ci_low", "rank_ci_high", "group"];
    for (const c of scores) {
      head.push(c.key, `${c.key}_ci_low`, `${c.key}_ci_high`, `${c.key}_mark`);
    }
    const lines = [head];
    for (const label of labels) {
      const r = v.ranks[label] || {};
      const line = [ROW[label].name, ROW[label].quoted, r.rank ?? "", r.lo ?? "", r.hi ?? "",
        r.group ?? ""];
      for (const c of scores) {
        const cell = cellOf(v, label, c) || {};
        line.push(cell.v ?? "", cell.lo ?? "", cell.hi ?? "",
          cell.m === UP ? "above" : cell.m === DOWN ? "below" : "");
      }
      lines.push(line);
    }
    const comment = `# neobench leaderboard page: ${DATA.benchmark}; view ${location.hash || "#"}`;
    return [comment, ...lines.map((line) => line.map(quote).join(","))].join("\n") + "\n";
  }

  function jsonText() {
    const { v, scores, labels } = currentView();
    const rows = labels.map((label) => ({
      model: ROW[label].name,
      quoted: ROW[label].quoted,
      rank: v.ranks[label] ? v.ranks[label].rank : null,
      rank_ci_low: v.ranks[label] ? v.ranks[label].lo : null,
      rank_ci_high: v.ranks[label] ? v.ranks[label].hi : null,
      group: v.ranks[label] ? v.ranks[label].group : null,
      cells: Object.fromEntries(scores.map((c) => [c.key, cellOf(v, label, c)])),
    }));
    const body = { benchmark: DATA.benchmark, view: { ...state }, settings: DATA.settings,
      columns: scores.map((c) => c.key), rows, notes: DATA.notes };
    return JSON.stringify(body, null, 1) + "\n";
  }

  // ---------------------------------------------------------------- controls and legend

  function fillControls() {
    const type = document.getElementById("f-type");
    type.replaceChildren(h("option", { value: "" }, "All types (Table 4)"),
      ...DATA.types.map(([t, , n]) => h("option", { value: t }, `${t} (${n})`)));
    const task = document.getElementById("f-task");
    const groups = BY_TASK ? DATA.tasks.map(([name]) => h("option", { value: name }, name)) :
      DATA.types.map(([t]) => h("optgroup", { label: t }, DATA.tasks.filter(([, tt]) => tt === t)
        .map(([name]) => h("option", { value: name }, name))));
    task.replaceChildren(h("option", { value: "" }, "All tasks"), ...groups);
    // GLUE's table has no task types and no zero-shot view: those controls are not shown.
    type.parentElement.hidden = BY_TASK;
    const rows = document.getElementById("f-rows");
    rows.replaceChildren(...ROW_KINDS.map(([value, text]) => h("option", { value }, text)));
    type.addEventListener("change", () => update({ type: type.value, task: "" }));
    task.addEventListener("change", () => update({ task: task.value,
      type: task.value && !BY_TASK ? TASK_TYPE[task.value] : state.type }));
    rows.addEventListener("change", () => update({ rows: rows.value }));
    const zs = document.getElementById("f-zs");
    zs.addEventListener("change", () => update({ zs: zs.checked ? "1" : "0" }));
    const refused = DATA.views.zero_shot && DATA.views.zero_shot.refused;
    zs.parentElement.hidden = BY_TASK;
    if (refused) {
      zs.disabled = true;
      zs.parentElement.title = `No zero-shot view: ${refused}`;
    }
    const pick = (key) => (event) => update({ [key]: event.target.value });
    document.getElementById("ab-a").addEventListener("change", pick("a"));
    document.getElementById("ab-b").addEventListener("change", pick("b"));
    document.getElementById("ab-swap").addEventListener("click", () => update({
      a: document.getElementById("ab-b").value, b: document.getElementById("ab-a").value }));
    document.getElementById("dl-csv").addEventListener("click", () =>
      download("leaderboard.csv", "text/csv", csvText()));
    document.getElementById("dl-json").addEventListener("click", () =>
      download("leaderboard.json", "application/json", jsonText()));
    document.getElementById("prov-close").addEventListener("click", closeProvenance);
    document.addEventListener("keydown", (e) => { if (e.key === "Escape") closeProvenance(); });
  }

  function fillLegend() {
    const s = DATA.settings;
    document.getElementById("meta").textContent = `${DATA.rows.length} rows · ` +
      `${DATA.tasks.length} tasks · generated ${DATA.generated} by neobench ${DATA.neobench}` +
      (DATA.intervals ? ` · ${s.resamples} resamples, seed ${s.seed}, over ${s.over}` : "") +
      (DATA.baseline ? ` · baseline ${DATA.baseline}` : "");
    const legend = [
      "Scores x100. ± = half the width of the 95% bootstrap interval; the whisker under a " +
        "score draws that interval on the column's range (rows shown).",
      BY_TASK ? `${UP} / ${DOWN}: significantly above / below the baseline row (paired ` +
        "bootstrap over the same resampled validation items, Holm over the task columns); " +
        "never colour alone." : `${UP} / ${DOWN}: significantly above / below the baseline ` +
        "row, the test of neobench compare (paired bootstrap, Holm); never colour alone.",
      BY_TASK ? "Each task's cell is the grid point chosen by the row's selection rule, the " +
        "mean over its seeds on the validation split; sd = the seeds' spread." :
        "† = in-domain: the row's model trained on the task, or on a task the column averages.",
      "Rank [95% interval] on Avg.: from 1 + the rows significantly above to N − the rows " +
        "significantly below, by the paired test between every two rows (Holm over the pairs, " +
        `alpha ${s.alpha}); best = significantly above every other row. Group: rows sharing a ` +
        "letter are not significantly different.",
      `Rows marked quoted are the NeoBERT paper's Table ${BY_TASK ? 3 : 4} numbers as ` +
        "published, not computed here: no interval, no test, no drill-down.",
      "Hover or click a score for its provenance; ▸ opens a row's tasks with their intervals " +
        "and each seed as a dot. Sort, filters and A/B are kept in the address: copy it to " +
        "share the view.",
    ];
    document.getElementById("legend-list").replaceChildren(...legend.map((t) => h("li", {}, t)));
    document.getElementById("notes").replaceChildren(...DATA.notes.map((t) => h("li", {}, t)));
    document.getElementById("sources").replaceChildren(...DATA.sources.map((t) => h("li", {}, t)));
  }

  function syncControls() {
    document.getElementById("f-type").value = state.type;
    document.getElementById("f-task").value = state.task;
    document.getElementById("f-rows").value = state.rows;
    document.getElementById("f-zs").checked = state.zs === "1" && !DATA.views.zero_shot.refused;
    const v = view();
    const note = document.getElementById("view-note");
    note.textContent = v === DATA.views.all ? "" : `Zero-shot view: ${v.tasks.length} of ` +
      `${DATA.tasks.length} tasks. ${v.notes.join(" ")}`;
  }

  function render() {
    const focused = document.activeElement && document.activeElement.dataset ?
      document.activeElement.dataset.key : null;
    syncControls();
    renderBoard();
    renderAB();
    if (focused) {
      const again = document.querySelector(`[data-key="${CSS.escape(focused)}"]`);
      if (again) again.focus();
    }
  }

  readHash();
  fillControls();
  fillLegend();
  render();
  window.addEventListener("hashchange", () => { readHash(); render(); });
})();

// The attention page of `attncli serve` and of `inspect-weights --html`.
//
// With a server: the form posts to /translate (translations, n-best, scores), /inspect
// (one sentence's attention view, over a given reference if there is one, with its words
// view and gold links) and /step (one query walked through the attention). Offline: the
// view and every step are embedded in <script id="attncli-data">, and no request is made.
// The JSON shapes are those of attncli.search.inspection's SentenceView.to_dict() and
// attncli.model.trace's AttentionStep.to_dict().
//
// The words view shows view.words' matrices, folded by the server (a row word is the mean
// of its pieces' rows, a column word the sum of its pieces' columns). An attention over the
// source ("linked": the cross-attention, the alignment layer) has links, the argmax of each
// target word's row of its own word weights, as `attncli translate --alignments` links
// them: on a word's cell in the words view, on the cells of both words' pieces in the token
// view. Gold links are marked in its words view. The attentions' names are the server's
// (attncli.attentions): each entry's "title".
"use strict";

(function () {
  // Matplotlib's "Blues", from near white (0) to dark blue (weight 1, as in the PNG of
  // `inspect-weights --png`; or the largest weight shown, when that scale is chosen).
  const BLUES = [
    [247, 251, 255], [222, 235, 247], [198, 219, 239], [158, 202, 225], [107, 174, 214],
    [66, 146, 198], [33, 113, 181], [8, 81, 156], [8, 48, 107],
  ];

  const byId = (id) => document.getElementById(id);
  const state = {
    offline: null, // the embedded data, or null with a server
    view: null, // the SentenceView dict shown
    request: null, // {text, model, beam}: what /step needs to rebuild the view's sentence
    attention: "cross",
    layer: 1, // 1-based
    head: null, // 1-based, or null: the mean of the heads
    step: null, // the walked row, 1-based
    words: false, // the words view is shown
    scale: "fixed", // colours from 0 to 1 ("fixed") or to the largest weight shown
    models: [], // the server's /models descriptions (none offline)
  };
  // What came before the first output token, spelt as the vocabulary and the server do.
  const START = "[START]";
  // The latest request of each kind: an older answer that arrives later is dropped.
  const latest = { translate: 0, inspect: 0, step: 0 };

  // ---- small helpers ----------------------------------------------------------------

  function element(tag, attributes, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "className") node.className = value;
      else if (name === "text") node.textContent = value;
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children) {
      if (child !== null && child !== undefined) node.append(child);
    }
    return node;
  }

  function fixed(value, decimals = 3) {
    return value === null || value === undefined ? "−∞" : Number(value).toFixed(decimals);
  }

  // A token as written, in a box of its own: quotes around it would be taken for part of
  // a token such as "'".
  function tokenBox(token) {
    return element("span", { className: "token", text: token });
  }

  // The text of `parts` (strings and token boxes), for an aria-label.
  function plain(parts) {
    return parts.map((part) => (typeof part === "string" ? part : part.textContent)).join("");
  }

  // "[0.097, -0.151, 0.092, -0.035, …] ‖0.592‖": the first components and the norm of
  // the whole vector, as the terminal tables print them. How many components show
  // depends on the screen's width (the stylesheet's k0..k3; a phone shows a table's
  // vectors by their norms); the title holds every component the record kept.
  function vector(values, norm, width, shown = 4) {
    const title = `${values.length} of ${width} components: ` +
      values.map((value) => fixed(value, 4)).join(", ") + ` (norm ${fixed(norm, 4)})`;
    const node = element("span", { className: "vector", title },
      element("span", { className: "open", text: "[" }));
    values.slice(0, shown).forEach((value, k) => node.append(
      element("span", { className: `k${k}`, text: (k > 0 ? ", " : "") + fixed(value) })));
    node.append(element("span", { className: "more", text: ", …] " }), `‖${fixed(norm)}‖`);
    return node;
  }

  // The colour of `fraction` (0..1) of the way along BLUES.
  function colour(fraction) {
    const position = Math.min(Math.max(fraction, 0), 1) * (BLUES.length - 1);
    const low = Math.floor(position);
    const high = Math.min(low + 1, BLUES.length - 1);
    const part = position - low;
    const rgb = BLUES[low].map((value, i) => Math.round(value + (BLUES[high][i] - value) * part));
    return `rgb(${rgb.join(",")})`;
  }

  function showError(message) {
    const line = byId("error");
    line.textContent = String(message).replace(/\s+/g, " ").trim();
    line.hidden = false;
  }

  function clearError() {
    byId("error").hidden = true;
    byId("error").textContent = "";
  }

  function busy(message) {
    const line = byId("busy");
    line.textContent = message || "";
    line.hidden = !message;
    byId("submit").disabled = Boolean(message);
  }

  // ---- the server's API -------------------------------------------------------------

  async function api(path, body) {
    const options = { headers: { Accept: "application/json" } };
    if (body !== undefined) {
      options.method = "POST";
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(path, options);
    } catch (error) {
      throw new Error(`cannot reach the server for /${path} (${error.message})`);
    }
    let answer = null;
    try {
      answer = await response.json();
    } catch (error) {
      answer = null;
    }
    if (!response.ok) {
      const error = new Error(answer && answer.error ? answer.error
        : `/${path} answered ${response.status} ${response.statusText}`);
      error.status = response.status;
      throw error;
    }
    if (answer === null) throw new Error(`/${path} did not answer JSON`);
    return answer;
  }

  // ---- the attention view -----------------------------------------------------------

  function entryOf(view, attention) {
    return view.attentions.find((entry) => entry.attention === attention);
  }

  // The words view's matrices of `attention`, labelled as the token view's are.
  function wordEntryOf(view, attention) {
    const entry = entryOf(view, attention);
    const words = view.words.attentions.find((item) => item.attention === attention);
    return { ...entry, rows: words.rows, columns: words.columns, layers: words.layers };
  }

  function shownEntry() {
    return state.words ? wordEntryOf(state.view, state.attention)
      : entryOf(state.view, state.attention);
  }

  // The cells to mark, as "row,column" strings: the links (of an attention over the
  // source only), and in the words view the sure and possible gold links.
  function marksOf(view) {
    const marks = { links: new Set(), sure: new Set(), possible: new Set() };
    if (!view.words || !entryOf(view, state.attention).linked) return marks;
    const source = view.words.source;
    const target = view.words.target;
    const weights = shownWeights(wordEntryOf(view, state.attention));
    if (source.length === 0) return marks;
    weights.forEach((row, j) => {
      if (target[j].positions.length === 0) return;
      // The first largest: the lowest source word on a tie, as the server links them.
      const i = row.reduce((best, weight, k) => (weight > row[best] ? k : best), 0);
      if (state.words) {
        marks.links.add(`${j},${i}`);
      } else {
        for (const t of target[j].positions) {
          for (const s of source[i].positions) marks.links.add(`${t},${s}`);
        }
      }
    });
    if (state.words && view.words.gold) {
      for (const [i, j] of view.words.gold.sure) marks.sure.add(`${j},${i}`);
      for (const [i, j] of view.words.gold.possible) marks.possible.add(`${j},${i}`);
    }
    return marks;
  }

  // The weights shown: one head's rows × columns, or the mean over the heads.
  function shownWeights(entry) {
    const heads = entry.layers[state.layer - 1].heads;
    if (state.head !== null) return heads[state.head - 1];
    return heads[0].map((row, i) => row.map((_, j) =>
      heads.reduce((sum, head) => sum + head[i][j], 0) / heads.length));
  }

  function fillSelect(select, options, chosen) {
    select.replaceChildren(...options.map(([value, label]) =>
      element("option", { value, text: label, selected: String(value) === String(chosen) })));
  }

  function showChoices() {
    const view = state.view;
    const entry = entryOf(view, state.attention);
    const kinds = view.attentions.map((item) => [item.attention, item.title]);
    fillSelect(byId("attention-kind"), kinds, state.attention);
    byId("attention-choice").hidden = kinds.length < 2;
    const layers = entry.layers.length;
    fillSelect(byId("layer"), entry.layers.map((_, i) => [i + 1, `${i + 1} of ${layers}`]),
      state.layer);
    byId("layer-choice").hidden = layers < 2;
    const heads = entry.layers[state.layer - 1].heads.length;
    fillSelect(byId("head"), [["mean", `mean of ${heads}`]].concat(
      Array.from({ length: heads }, (_, i) => [i + 1, `${i + 1} of ${heads}`])),
    state.head === null ? "mean" : state.head);
    byId("head-choice").hidden = heads < 2;
  }

  // "output 1 [I] → source 1 [Tengo]: weight 0.707, link", each token in a box ("output
  // word 1 ..." in words).
  function describe(entry, i, j, weight, marked) {
    const unit = state.words ? " word" : "";
    return [`${entry.row_label}${unit} ${i + 1} `, tokenBox(entry.rows[i]),
      ` → ${entry.column_label}${unit} ${j + 1} `, tokenBox(entry.columns[j]),
      `: weight ${fixed(weight)}` + marked.map((name) => `, ${name}`).join("")];
  }

  function markedAt(marks, i, j) {
    return Object.keys(MARK_NAMES).filter((kind) => marks[kind].has(`${i},${j}`));
  }

  const MARK_NAMES = { links: "link", sure: "sure gold link", possible: "possible gold link" };

  // The probability the model gives each row's output token, exp(token_log_probs[t])
  // (p(y_t | y_<t, x): given the source and the tokens before it); in words, each word's
  // is the product of its pieces'. Null with rows that are not output tokens or a view
  // without token_log_probs; a word with no piece has none. A log P of null is −∞.
  function rowProbabilities(entry) {
    const logs = state.view.token_log_probs;
    if (!logs || entry.row_label !== "output") return null;
    const logOf = (t) => (logs[t] === null ? -Infinity : logs[t]);
    if (!state.words) return entry.rows.map((_, t) => Math.exp(logOf(t)));
    return state.view.words.target.map((word) => (word.positions.length === 0 ? null
      : Math.exp(word.positions.reduce((sum, t) => sum + logOf(t), 0))));
  }

  // "93%", "4%", "<1%": a row's probability beside its label, with a bar as long.
  function probabilityOf(probability, token) {
    const percent = probability * 100;
    const text = percent >= 0.5 ? `${Math.round(percent)}%` : "<1%";
    const bar = element("span", { className: "bar" });
    bar.style.width = `${percent}%`;
    return element("span", {
      className: "probability", "data-probability": probability,
      title: `P(${token}) = ${fixed(probability, 4)}, given the source and the ` +
        `${state.words ? "words" : "tokens"} before it`,
    }, element("span", { className: "value", text }),
    element("span", { className: "track", "aria-hidden": "true" }, bar));
  }

  function heatmap(entry, weights, marks) {
    const rows = entry.rows.length;
    const columns = entry.columns.length;
    // The darkest blue is weight 1, or the largest weight shown (the legend says which).
    const largest = Math.max(...weights.map((row) => Math.max(...row))) || 1;
    const top = state.scale === "largest" ? largest : 1;
    const grid = element("div", {
      className: "heatmap" + (byId("numbers").checked ? " numbers" : ""),
      role: "grid",
      "aria-label": `${entry.title}: ${entry.row_label} tokens ` +
        `(rows) × ${entry.column_label} tokens (columns)`,
      "aria-rowcount": rows + 1,
      "aria-colcount": columns + 1,
      "data-heatmap": entry.attention,
      "data-layer": state.layer,
      "data-head": state.head === null ? "mean" : state.head,
      "data-rows": rows,
      "data-columns": columns,
      "data-top": top,
      "data-words": state.words ? "true" : "false",
    });
    grid.style.gridTemplateColumns = `auto repeat(${columns}, var(--cell))`;
    const header = element("div", { className: "heatmap-row", role: "row" },
      element("div", { className: "corner", role: "columnheader" },
        element("span", { text: `${entry.row_label} ↓` }),
        element("span", { text: `${entry.column_label} →` })));
    // Tokens of one or two characters stay upright; longer ones are read bottom to top.
    entry.columns.forEach((token, j) => header.append(element("div", {
      className: "column-label" + ([...token].length <= 2 ? " short" : ""),
      role: "columnheader", title: `${entry.column_label} ` +
        `${j + 1}: ${token}`, "data-column": j,
    }, element("span", { text: token }))));
    grid.append(header);
    const probabilities = rowProbabilities(entry);
    weights.forEach((row, i) => {
      const line = element("div", { className: "heatmap-row", role: "row", "data-row": i });
      const label = [element("span", { className: "index", text: String(i + 1) }),
        element("span", { className: "token", text: entry.rows[i] })];
      // A word has no step of its own: only a token's row is walked. A row's button is
      // clicked, not tabbed to: the grid is one tab stop, and Enter on a cell walks its row.
      line.append(element("div", { className: "row-head", role: "rowheader" },
        state.words ? element("span", { className: "row-label", "data-row": i }, ...label)
          : element("button", {
            type: "button", className: "row-label", "data-row": i, tabindex: -1,
            "aria-pressed": state.step === i + 1 ? "true" : "false",
            title: `walk step ${i + 1}: ${entry.row_label} token ${entry.rows[i]}`,
            onclick: () => walk(i + 1),
          }, ...label),
        probabilities && probabilities[i] !== null
          ? probabilityOf(probabilities[i], entry.rows[i]) : null));
      row.forEach((weight, j) => {
        const kinds = markedAt(marks, i, j);
        const text = plain(describe(entry, i, j, weight, kinds.map((kind) => MARK_NAMES[kind])));
        const cell = element("div", {
          className: "cell", role: "gridcell", tabindex: i === 0 && j === 0 ? 0 : -1,
          "aria-label": text, "data-row": i, "data-column": j,
          "data-weight": weight,
          "data-link": kinds.includes("links") ? "true" : null,
          "data-gold": kinds.includes("sure") ? "sure" : kinds.includes("possible")
            ? "possible" : null,
        }, element("span", { text: fixed(weight, 2).replace(/^0(?=\.)/, "") }));
        cell.style.background = colour(weight / top);
        if (weight / top > 0.5) cell.classList.add("dark");
        if (state.step === i + 1) cell.classList.add("walked");
        if (kinds.includes("links")) cell.classList.add("link");
        if (kinds.includes("sure")) cell.classList.add("gold-sure");
        if (kinds.includes("possible")) cell.classList.add("gold-possible");
        line.append(cell);
      });
      grid.append(line);
    });
    return grid;
  }

  // The read-out of `cell` (`parts`, from describe) beside it: right of the cell, else
  // left of it, else under it; hidden with no cell.
  function highlight(grid, cell, parts) {
    grid.querySelectorAll(".hot").forEach((node) => node.classList.remove("hot"));
    const info = byId("cell-info");
    if (!cell) {
      info.hidden = true;
      return;
    }
    const i = cell.dataset.row;
    const j = cell.dataset.column;
    grid.querySelector(`.row-label[data-row="${i}"]`).classList.add("hot");
    grid.querySelector(`.column-label[data-column="${j}"]`).classList.add("hot");
    info.replaceChildren(...parts);
    info.hidden = false;
    const area = info.parentElement.getBoundingClientRect();
    const box = cell.getBoundingClientRect();
    const width = info.getBoundingClientRect().width;
    const room = document.documentElement.clientWidth;
    const gap = 6;
    let left = box.right + gap;
    let top = box.top;
    if (left + width > room - gap) left = box.left - gap - width;
    if (left < gap) {
      left = Math.min(Math.max(box.left, gap), Math.max(room - gap - width, 0));
      top = box.bottom + gap;
    }
    info.style.left = `${left - area.left}px`;
    info.style.top = `${top - area.top}px`;
  }

  // Arrow keys move between cells (one tab stop for the whole grid); Enter walks the row.
  function onGridKey(event) {
    const cell = event.target.closest(".cell");
    if (!cell) return;
    const grid = cell.closest(".heatmap");
    let i = Number(cell.dataset.row);
    let j = Number(cell.dataset.column);
    const rows = Number(grid.dataset.rows);
    const columns = Number(grid.dataset.columns);
    const moves = {
      ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1],
    };
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      if (!state.words) walk(i + 1);
      return;
    }
    if (event.key === "Home") j = 0;
    else if (event.key === "End") j = columns - 1;
    else if (moves[event.key]) {
      i = Math.min(Math.max(i + moves[event.key][0], 0), rows - 1);
      j = Math.min(Math.max(j + moves[event.key][1], 0), columns - 1);
    } else return;
    event.preventDefault();
    const next = grid.querySelector(`.cell[data-row="${i}"][data-column="${j}"]`);
    cell.tabIndex = -1;
    next.tabIndex = 0;
    next.focus();
  }

  // What the marks and the rows mean, under the choices.
  function showMarks(marks) {
    const parts = [];
    const swatch = (kind) => element("span", { className: `swatch ${kind}`, "aria-hidden": "true" });
    if (marks.links.size) {
      parts.push(element("span", {}, swatch("link"), " link: each target word's largest " +
        `word weight in the ${entryOf(state.view, state.attention).title}`));
    }
    if (marks.sure.size) parts.push(element("span", {}, swatch("gold-sure"), " sure gold link"));
    if (marks.possible.size) {
      parts.push(element("span", {}, swatch("gold-possible"), " possible gold link"));
    }
    if (!state.words && state.view.words && state.view.words.gold) {
      parts.push(element("span", { text: "(the gold links show in the words view)" }));
    }
    byId("marks").replaceChildren(...parts);
    byId("marks").hidden = parts.length === 0;
    const unit = state.words ? "word" : "token";
    const probabilities = rowProbabilities(shownEntry()) ? ` Beside each output ${unit}: ` +
      `how probable the model finds it, given the source and the ${unit}s before it` +
      (state.words ? " (the product of its pieces')." : ".") : "";
    byId("hint").textContent = (state.words
      ? `${state.view.words.note.replace(/^./, (first) => first.toUpperCase())}. Hover ` +
        "or focus a cell for its weight; turn words off to walk a token's step."
      : "Hover or focus a cell for its weight; choose a row's token to walk that step.") +
      probabilities;
  }

  function showHeatmap() {
    const entry = shownEntry();
    const marks = marksOf(state.view);
    const weights = shownWeights(entry);
    const grid = heatmap(entry, weights, marks);
    showMarks(marks);
    const show = (cell) => highlight(grid, cell, cell && describe(entry, Number(cell.dataset.row),
      Number(cell.dataset.column), weights[cell.dataset.row][cell.dataset.column],
      markedAt(marks, cell.dataset.row, cell.dataset.column).map((kind) => MARK_NAMES[kind])));
    grid.addEventListener("mouseover", (event) => show(event.target.closest(".cell")));
    grid.addEventListener("focusin", (event) => show(event.target.closest(".cell")));
    grid.addEventListener("mouseleave", () => show(grid.contains(document.activeElement)
      ? document.activeElement.closest(".cell") : null));
    grid.addEventListener("focusout", (event) => {
      if (!grid.contains(event.relatedTarget)) show(null);
    });
    grid.addEventListener("keydown", onGridKey);
    byId("heatmap-scroll").replaceChildren(grid);
    byId("heatmap-scroll").onscroll = () => show(null);
    const top = Number(grid.dataset.top);
    byId("legend-top").textContent = top === 1 ? "1" : fixed(top);
    byId("legend-note").hidden = state.scale !== "largest";
    show(null);
    showOverview(entry);
  }

  // ---- every layer and head ---------------------------------------------------------

  // The most pixels a side of one small heatmap takes; each cell is a square of whole
  // pixels, at least one.
  const OVERVIEW_SIDE = { phone: 48, wide: 96 };

  // One small heatmap per layer (rows) and head (columns) of `entry`, coloured 0 to 1
  // whatever the main view's scale, so heads can be compared; a self-attention model's
  // only (a recurrent model has one attention, with one layer and one head).
  function showOverview(entry) {
    const section = byId("overview");
    const box = byId("overview-scroll");
    const heads = Math.max(...entry.layers.map((layer) => layer.heads.length));
    const selfAttention = state.view.attentions.some((item) => item.attention !== "cross");
    if (!selfAttention || entry.layers.length * heads < 2) {
      section.hidden = true;
      box.replaceChildren();
      return;
    }
    const focused = box.contains(document.activeElement) ? document.activeElement : null;
    const side = window.innerWidth < 768 ? OVERVIEW_SIDE.phone : OVERVIEW_SIDE.wide;
    const scale = Math.max(1, Math.floor(side / Math.max(entry.rows.length,
      entry.columns.length)));
    const title = entry.title;
    const grid = element("div", {
      className: "overview-grid", role: "grid",
      "aria-label": `${title}: every layer (rows) and head (columns); Enter shows one`,
      "aria-rowcount": entry.layers.length + 1, "aria-colcount": heads + 1,
      "data-overview": entry.attention, "data-layers": entry.layers.length,
      "data-heads": heads, "data-scale": scale,
    });
    grid.style.gridTemplateColumns = `auto repeat(${heads}, max-content)`;
    grid.append(element("div", { className: "heatmap-row", role: "row" },
      element("div", { className: "overview-corner", role: "columnheader" }),
      ...Array.from({ length: heads }, (_, h) => element("div", {
        className: "overview-label", role: "columnheader", text: `head ${h + 1}`,
      }))));
    entry.layers.forEach((layer, l) => {
      const line = element("div", { className: "heatmap-row", role: "row" },
        element("div", {
          className: "overview-label" + (state.layer === l + 1 ? " current" : ""),
          role: "rowheader", text: `layer ${l + 1}`,
        }));
      layer.heads.forEach((weights, h) => {
        const chosen = state.layer === l + 1 && state.head === h + 1;
        const canvas = element("canvas", {
          width: entry.columns.length * scale, height: entry.rows.length * scale,
          "aria-hidden": "true",
        });
        const context = canvas.getContext("2d");
        weights.forEach((row, i) => row.forEach((weight, j) => {
          context.fillStyle = colour(weight);
          context.fillRect(j * scale, i * scale, scale, scale);
        }));
        line.append(element("div", {
          className: "thumbnail", role: "gridcell", tabindex: -1,
          "aria-label": `layer ${l + 1}, head ${h + 1}`, "aria-selected": String(chosen),
          title: `layer ${l + 1}, head ${h + 1}: show it in the heatmap`,
          "data-layer": l + 1, "data-head": h + 1,
          onclick: () => openHead(l + 1, h + 1, true),
        }, canvas));
      });
      grid.append(line);
    });
    const again = focused && grid.querySelector(`.thumbnail[data-layer="${
      focused.dataset.layer}"][data-head="${focused.dataset.head}"]`);
    (again || grid.querySelector('.thumbnail[aria-selected="true"]') ||
      grid.querySelector(".thumbnail")).tabIndex = 0;
    grid.addEventListener("keydown", onOverviewKey);
    box.replaceChildren(grid);
    byId("overview-note").textContent = `Each head of the ${title}, coloured 0 to 1; ` +
      "choose one to show it in the heatmap.";
    section.hidden = false;
    if (again) again.focus();
  }

  // The main view shows `layer` and `head`; a click brings it into view.
  function openHead(layer, head, click) {
    state.layer = layer;
    state.head = head;
    choose();
    if (click) byId("heatmap-scroll").scrollIntoView({ block: "nearest" });
  }

  // Arrow keys, Home and End move between the small heatmaps (one tab stop for all);
  // Enter or Space shows the focused one in the heatmap.
  function onOverviewKey(event) {
    const cell = event.target.closest(".thumbnail");
    if (!cell) return;
    const grid = cell.closest(".overview-grid");
    let layer = Number(cell.dataset.layer);
    let head = Number(cell.dataset.head);
    const moves = {
      ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1],
    };
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      openHead(layer, head, false);
      return;
    }
    if (event.key === "Home") head = 1;
    else if (event.key === "End") head = Number(grid.dataset.heads);
    else if (moves[event.key]) {
      layer = Math.min(Math.max(layer + moves[event.key][0], 1), Number(grid.dataset.layers));
      head = Math.min(Math.max(head + moves[event.key][1], 1), Number(grid.dataset.heads));
    } else return;
    event.preventDefault();
    const next = grid.querySelector(`.thumbnail[data-layer="${layer}"][data-head="${head}"]`);
    if (!next) return;
    cell.tabIndex = -1;
    next.tabIndex = 0;
    next.focus();
  }

  // "reference · score −0.89 (log P / lp, the search's score) · log P −4.12 · ..."
  function referenceText(reference) {
    return `given reference · score ${fixed(reference.score)} (log P / lp, the search's ` +
      `score) · log P ${fixed(reference.log_prob)} · perplexity ` +
      `${fixed(reference.perplexity)} per token`;
  }

  function showView(view, request, words) {
    state.view = view;
    state.request = request;
    state.words = Boolean(view.words) && words;
    byId("words").checked = state.words;
    byId("words").disabled = !view.words;
    // The offline page opens on inspect-weights' --attention, else the cross-attention.
    const first = [view.show_attention, "cross"].find((name) => entryOf(view, name));
    state.attention = first || view.attentions[0].attention;
    const entry = entryOf(view, state.attention);
    state.layer = entry.layers.length; // the last block, as inspect-weights shows it
    state.head = entry.layers[state.layer - 1].heads.length > 1 ? null : 1;
    state.step = null;
    const hypothesis = view.hypotheses[view.shown || 0];
    byId("sentence").replaceChildren(
      element("span", { className: "source", text: view.source }),
      element("span", { className: "arrow", text: " → " }),
      element("span", { className: "output", text: hypothesis.text }),
      view.reference ? element("span", { className: "reference", id: "reference-score",
        text: referenceText(view.reference) }) : null,
    );
    showLongInput(view);
    byId("attention").hidden = false;
    byId("walk").hidden = true;
    showChoices();
    showHeatmap();
  }

  // A sentence of more source tokens than the model's training pairs had at most (its
  // run's data.max_length, from /models) is one it never saw whole: the page says so.
  function showLongInput(view) {
    const model = state.models.find((item) => item.name === view.model);
    const limit = model && model.max_length;
    const count = view.source_tokens.length;
    const note = byId("long-input");
    note.hidden = !(limit && count > limit);
    note.textContent = note.hidden ? "" : `This sentence is ${count} tokens; the model ` +
      `was trained on sentences of at most ${limit}.`;
  }

  function choose() {
    state.step = null;
    byId("walk").hidden = true;
    showChoices();
    showHeatmap();
  }

  // ---- one step walked ----------------------------------------------------------------

  async function fetchStep(head, step) {
    if (state.offline) {
      // Keyed "attention/layer/head/step", head 1 for a single-head attention.
      const steps = state.offline.steps || {};
      const key = `${state.attention}/${state.layer}/${head === null ? 1 : head}/${step}`;
      if (!(key in steps)) {
        throw new Error(`this file holds no walk of ${state.attention} layer ${state.layer} ` +
          `step ${step}`);
      }
      return steps[key];
    }
    return api("step", {
      ...state.request, attention: state.attention, layer: state.layer, head, step,
    });
  }

  async function walk(step) {
    const entry = entryOf(state.view, state.attention);
    const heads = entry.layers[state.layer - 1].heads.length;
    // A walk is one head's computation: the mean of the heads walks head 1.
    const head = heads > 1 ? (state.head === null ? 1 : state.head) : null;
    const ticket = ++latest.step;
    state.step = step;
    document.querySelectorAll(".row-label").forEach((button) =>
      button.setAttribute("aria-pressed", String(Number(button.dataset.row) === step - 1)));
    document.querySelectorAll(".heatmap .cell").forEach((cell) =>
      cell.classList.toggle("walked", Number(cell.dataset.row) === step - 1));
    clearError();
    try {
      const record = await fetchStep(head, step);
      if (ticket !== latest.step) return;
      showWalk(record, entry, heads);
    } catch (error) {
      if (ticket === latest.step) showError(error.message);
    }
  }

  // The walk's table shows as many of its vectors' first components (3, 2, 1, or none:
  // their norms alone) as fit its width without scrolling.
  function fitWalkTable() {
    const box = document.querySelector("#walk .table-scroll");
    if (!box || box.closest("[hidden]")) return;
    for (const components of [3, 2, 1, 0]) {
      box.dataset.components = components;
      if (box.scrollWidth <= box.clientWidth) break;
    }
    byId("walk").querySelector(".phone-note").hidden = box.dataset.components !== "0";
  }

  function walkTable(columns, rows, sum) {
    return element("div", { className: "table-scroll" }, element("table", { className: "steps" },
      element("thead", {}, element("tr", {}, ...columns.map((name) =>
        element("th", { scope: "col", text: name })))),
      element("tbody", {}, ...rows),
      element("tfoot", {}, sum)));
  }

  function weightCell(weight) {
    const bar = element("span", { className: "bar" });
    bar.style.width = `${Math.round(weight * 100)}%`;
    return element("td", { className: "number weight" },
      element("span", { className: "value", text: fixed(weight) }), bar);
  }

  function showWalk(record, entry, heads) {
    const selfAttention = "inputs" in record;
    const best = record.weights.indexOf(Math.max(...record.weights));
    const section = byId("walk");
    const where = `${entryOf(state.view, record.attention).title}, layer ${record.layer}` +
      (record.head === null || record.head === undefined ? "" : `, head ${record.head}`);
    const parts = [];
    if (selfAttention) {
      parts.push(element("h3", {}, `${where}: query ${record.step} `,
        tokenBox(record.query_token)));
      if (heads > 1 && state.head === null) {
        parts.push(element("p", { className: "note", text: "The mean of the heads has no " +
          "walk of its own: this is head 1's; choose a head to walk another." }));
      }
      parts.push(element("p", { className: "given" }, "1. input x ",
        vector(record.x, record.x_norm, record.width)));
      parts.push(element("p", { className: "given" }, "2. query q = x W_q + b_q ",
        vector(record.query, record.query_norm, record.width)));
      parts.push(element("p", { className: "formula" },
        `score(q, k) = ${record.formula} (${record.score})`));
      parts.push(element("p", { className: "formula" }, "4. the score of each key; " +
        "5. softmax over the positions it may see; 6. weight × value; 7. their sum is the " +
        "head's output (before W_o)"));
    } else {
      const previous = record.step === 1 ? START : entry.rows[record.step - 2];
      parts.push(element("h3", {}, `Output token ${record.step} `,
        tokenBox(record.query_token), " (after ", tokenBox(previous), `), ${where}`));
      parts.push(element("p", { className: "given" }, "query q ",
        vector(record.query, record.query_norm, record.width)));
      if (record.attention === "alignment") {
        parts.push(element("p", { className: "note", text: "The alignment layer's query " +
          "reads the token itself: q = tanh(W_q [f_t; f_t+1; E(y_t)] + b_q), f the " +
          "decoder's features (with the full context, a GRU's over the whole output " +
          "first); its keys are the encoder's h̄_s, scored through W_a." }));
      }
      parts.push(element("p", { className: "formula" },
        `score(q, k) = ${record.formula} (${record.score})`));
      parts.push(element("p", { className: "formula" }, "1. score_s = score(q, h̄_s); " +
        "2. a_s = exp(score_s) / Σ_s' exp(score_s'); 3. a_s h̄_s; 4. context c = Σ_s a_s h̄_s"));
      if (record.score.includes("local")) {
        parts.push(element("p", { className: "note", text: "1. is the score of every " +
          "position, −∞ outside the window; 2. is the weight the model used: the softmax " +
          "over the window only (local-p: times the Gaussian, so it sums below 1)" }));
      }
    }
    const rows = record.key_tokens.map((token, s) => {
      const weight = record.weights[s];
      const cells = [
        element("td", { className: "number", text: String(s + 1) }),
        element("th", { scope: "row", className: "token", text: token }),
      ];
      if (selfAttention) {
        cells.push(
          element("td", {}, vector(record.inputs[s], record.inputs_norms[s], record.width)),
          element("td", {}, vector(record.keys[s], record.keys_norms[s], record.width)));
      }
      cells.push(
        element("td", {}, vector(record.values[s], record.values_norms[s], record.width)),
        element("td", { className: "number", text: fixed(record.scores[s]) }),
        weightCell(weight),
        element("td", {}, vector(record.weighted_values[s], record.weighted_values_norms[s],
          record.width)));
      return element("tr", {
        className: s === best ? "best" : (weight === 0 ? "masked" : null),
        "data-key": s, "data-weight": weight,
      }, ...cells);
    });
    const total = record.weights.reduce((sum, weight) => sum + weight, 0);
    const columns = selfAttention
      ? ["s", "token", "input x_s", "3. key x_s W_k + b_k", "3. value x_s W_v + b_v",
        "4. score", "5. softmax", "6. weighted value"]
      : ["s", "source token", "encoder hidden h̄_s", "1. score", "2. softmax",
        "3. alignment a_s·h̄_s"];
    const sum = element("tr", {},
      element("th", { scope: "row", colspan: columns.length - 2,
        text: selfAttention ? "7. sum" : "4. sum" }),
      element("td", { className: "number", text: fixed(total) }),
      element("td", {}, selfAttention ? "output " : "context ",
        vector(record.context, record.context_norm, record.width)));
    parts.push(element("p", { className: "phone-note", text: "The table's vectors are " +
      "shown by their norms ‖·‖ here; a wider screen shows their first components." }));
    parts.push(walkTable(columns, rows, sum));
    section.replaceChildren(...parts);
    section.dataset.attention = record.attention;
    section.dataset.layer = record.layer;
    section.dataset.head = record.head === null || record.head === undefined ? "" : record.head;
    section.dataset.step = record.step;
    section.hidden = false;
    fitWalkTable();
    // A walk that opens below the screen (on a phone, always) is brought into view.
    if (section.getBoundingClientRect().top > window.innerHeight - 40) {
      section.scrollIntoView({ block: "start" });
    }
  }

  // ---- translations -----------------------------------------------------------------

  function hypothesesOf(item) {
    return item.hypotheses || item.n_best || [item];
  }

  // `given[n]`: sentence n's {reference, gold}, or {} (the offline page: none).
  function showTranslations(texts, translations, inspect, given = []) {
    const list = byId("translations");
    list.replaceChildren(...translations.map((item, n) => {
      const hypotheses = hypothesesOf(item);
      const reference = (given[n] || {}).reference;
      const button = element("button", {
        type: "button", className: "inspect",
        text: reference ? "Attention over its translation" : "Attention",
        "aria-label": `show the attention of sentence ${n + 1}'s translation`,
        onclick: () => inspect(texts[n], button, {}),
      });
      const over = reference ? element("button", {
        type: "button", className: "inspect", text: "Attention over the reference",
        "aria-label": `show the attention over sentence ${n + 1}'s reference`,
        onclick: () => inspect(texts[n], over, given[n]),
      }) : null;
      return element("li", { className: "result" },
        element("p", { className: "source", text: texts[n] }),
        element("ol", { className: "nbest" }, ...hypotheses.map((hypothesis, k) =>
          element("li", { className: k === 0 ? "best" : null },
            element("span", { className: k === 0 ? "translation" : "hypothesis",
              text: hypothesis.text }),
            hypothesis.score === undefined ? null
              : element("span", { className: "score", title: "the search's score",
                text: fixed(hypothesis.score) })))),
        reference ? element("p", { className: "given", text: `reference: ${reference}` }) : null,
        inspect ? element("div", { className: "buttons" }, over, button) : null);
    }));
    byId("results").hidden = false;
  }

  // "model default · beam 5 · alpha 0.6 · length ≤ 2 × source + 10"; over a given
  // reference, "model default · the reference, forced · alpha 0.6".
  function settingsText(model, search, forced) {
    const given = search || {};
    const settings = [model ? `model ${model}` : null];
    if (forced) {
      settings.push("the reference, forced");
      if ("alpha" in given) settings.push(`alpha ${given.alpha}`);
      return settings.filter(Boolean).join(" · ");
    }
    if ("beam_size" in given) {
      settings.push(given.beam_size === 1 ? "greedy" : `beam ${given.beam_size}`);
    }
    if ("alpha" in given) settings.push(`alpha ${given.alpha}`);
    if ("max_length_ratio" in given) {
      settings.push(`length ≤ ${given.max_length_ratio} × source + ${given.max_length_offset}`);
    }
    return settings.filter(Boolean).join(" · ");
  }

  // ---- with a server ----------------------------------------------------------------

  function positive(input) {
    const text = input.value.trim();
    if (text === "") return undefined;
    const value = Number(text);
    if (!Number.isInteger(value) || value < 1) {
      throw new Error(`${input.name.replace("_", "-")} must be a whole number ≥ 1, got ${text}`);
    }
    return value;
  }

  // `settings`: the model and beam the sentence was translated with; `given`: its
  // reference and gold links, if any (no beam then: nothing is searched).
  async function inspectSentence(text, settings, button, given = {}) {
    const request = { text, ...settings, words: true };
    if (given.reference) {
      delete request.beam;
      request.reference = given.reference;
      if (given.gold) request.gold = given.gold;
    }
    const ticket = ++latest.inspect;
    latest.step += 1; // a walk still under way belongs to the view being replaced
    document.querySelectorAll(".inspect").forEach((other) =>
      other.setAttribute("aria-current", String(other === button)));
    busy("looking inside…");
    try {
      const view = await api("inspect", request);
      if (ticket !== latest.inspect) return;
      showView(view, request, byId("words").checked || Boolean(request.gold));
      byId("about").textContent = settingsText(view.model, view.search, Boolean(view.reference));
    } finally {
      if (ticket === latest.inspect) busy("");
    }
  }

  // The lines of a field of one line per sentence: as many as the sentences at most
  // (trailing empty lines aside), an empty one meaning none.
  function perSentence(input, name, count) {
    const lines = input.value.replace(/\s+$/, "").split(/\r?\n/).map((line) => line.trim());
    if (lines.length === 1 && lines[0] === "") return Array(count).fill("");
    if (lines.length > count) {
      throw new Error(`${lines.length} lines of ${name} for ${count} ` +
        `sentence${count > 1 ? "s" : ""}: give one line per sentence`);
    }
    return Array.from({ length: count }, (_, n) => lines[n] || "");
  }

  // The /models description of the model chosen (undefined before they are known).
  function chosenModel() {
    return state.models.find((model) => model.name === byId("model").value);
  }

  async function submit(event) {
    event.preventDefault();
    clearError();
    const texts = byId("texts").value.split(/\r?\n/).filter((line) => line.trim() !== "");
    try {
      if (texts.length === 0) throw new Error("type a sentence to translate (one per line)");
      // A model the server cannot show the attention of says why in /models; the fields
      // for the attention over a reference are hidden then, and not read.
      const model = chosenModel();
      const refusal = model && model.inspect_refusal;
      const references = refusal ? Array(texts.length).fill("")
        : perSentence(byId("references"), "reference translations", texts.length);
      const golds = refusal ? Array(texts.length).fill("")
        : perSentence(byId("golds"), "gold links", texts.length);
      golds.forEach((gold, n) => {
        if (gold && !references[n]) {
          throw new Error(`the gold links of sentence ${n + 1} join the words of a ` +
            "reference: give its reference translation too");
        }
      });
      const given = references.map((reference, n) =>
        (reference ? { reference, gold: golds[n] || undefined } : {}));
      const settings = { model: byId("model").value || undefined, beam: positive(byId("beam")) };
      const body = { texts, ...settings, n_best: positive(byId("n-best")) };
      busy("translating…");
      const ticket = ++latest.translate;
      const answer = await api("translate", body);
      if (ticket !== latest.translate) return;
      busy("");
      const inspect = refusal ? null : (text, button, chosen) =>
        inspectSentence(text, settings, button, chosen).catch((error) => {
          busy("");
          showError(error.message);
        });
      showTranslations(texts, answer.translations, inspect, given);
      byId("no-attention").textContent = refusal ? `Model ${model.name}: ${refusal}` : "";
      byId("no-attention").hidden = !refusal;
      byId("results").focus();
      if (refusal) {
        byId("attention").hidden = true;
        byId("about").textContent = settingsText(model.name, null);
        return;
      }
      await inspectSentence(texts[0], settings, document.querySelector(".inspect"), given[0]);
    } catch (error) {
      busy("");
      showError(error.message);
    }
  }

  // Opened as /?token=TOKEN, the page's answer has set the token as a cookie: the address
  // bar and the history need it no more, and would show it to anyone looking.
  function forgetToken() {
    const address = new URL(window.location.href);
    if (address.searchParams.has("token")) {
      address.searchParams.delete("token");
      window.history.replaceState(window.history.state, "",
        address.pathname + address.search + address.hash);
    }
  }

  // The models, once they are loaded: a page opened while they load says so, and asks
  // again every LOADING_POLL milliseconds.
  const LOADING_POLL = 2000;

  async function loadedModels() {
    for (;;) {
      try {
        const answer = await api("models");
        busy("");
        return answer;
      } catch (error) {
        if (error.status !== 503) throw error;
        busy("The models are still loading; this page opens them when they are ready.");
      }
      await new Promise((resolve) => setTimeout(resolve, LOADING_POLL));
    }
  }

  async function startWithServer() {
    forgetToken();
    const form = byId("translate-form");
    form.hidden = false;
    form.addEventListener("submit", submit);
    // Ctrl+Enter (Cmd+Enter on a Mac) sends the form from any of its fields.
    form.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        if (!byId("submit").disabled) form.requestSubmit();
      }
    });
    byId("texts").focus();
    try {
      const answer = await loadedModels();
      const models = Array.isArray(answer) ? answer : answer.models;
      state.models = models;
      fillSelect(byId("model"), models.map((model) => [model.name, model.task
        ? `${model.name} (${model.task})` : model.name]), answer.default ||
        (models[0] && models[0].name));
      byId("model").closest("label").hidden = models.length < 2;
      // An empty beam is the model's own: its placeholder says which.
      const placeholder = () => {
        const chosen = chosenModel();
        const beam = chosen && chosen.decoding && chosen.decoding.beam_size;
        byId("beam").placeholder = beam ? String(beam) : "";
        byId("attention-fields").hidden = Boolean(chosen && chosen.inspect_refusal);
      };
      byId("model").addEventListener("change", placeholder);
      placeholder();
    } catch (error) {
      showError(error.message);
    }
  }

  // ---- offline: everything embedded -------------------------------------------------

  function startOffline(data) {
    state.offline = data;
    byId("about").textContent = settingsText(data.model, data.search, Boolean(data.reference));
    showTranslations([data.source], [{ hypotheses: data.hypotheses }], null);
    showView(data, null, Boolean(data.show_words));
  }

  function start() {
    byId("attention-kind").addEventListener("change", (event) => {
      state.attention = event.target.value;
      const entry = entryOf(state.view, state.attention);
      state.layer = entry.layers.length;
      state.head = entry.layers[state.layer - 1].heads.length > 1 ? null : 1;
      choose();
    });
    byId("layer").addEventListener("change", (event) => {
      state.layer = Number(event.target.value);
      choose();
    });
    byId("head").addEventListener("change", (event) => {
      state.head = event.target.value === "mean" ? null : Number(event.target.value);
      choose();
    });
    byId("words").addEventListener("change", (event) => {
      state.words = event.target.checked && Boolean(state.view && state.view.words);
      choose();
    });
    byId("scale").addEventListener("change", (event) => {
      state.scale = event.target.value;
      if (state.view) showHeatmap();
    });
    window.addEventListener("resize", fitWalkTable);
    byId("numbers").addEventListener("change", () => {
      byId("heatmap-scroll").querySelector(".heatmap")
        ?.classList.toggle("numbers", byId("numbers").checked);
    });
    const embedded = byId("attncli-data").textContent.trim();
    if (embedded) {
      try {
        startOffline(JSON.parse(embedded));
      } catch (error) {
        showError(`the embedded attention data cannot be read (${error.message})`);
      }
    } else {
      startWithServer();
    }
  }

  start();
})();

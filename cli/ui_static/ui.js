// gqa ui: polls /api/snapshot and redraws the page from it. Text goes in as
// text (job names are the users'), never as markup.
"use strict";

let plotsVersion = null;     // the figures' address changes when the server has drawn new ones

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function row(cells) {
  const tr = document.createElement("tr");
  for (const cell of cells) tr.appendChild(cell instanceof Node ? cell : el("td", cell));
  return tr;
}

function teamCell(team, colours) {
  const td = el("td");
  const swatch = el("span", null, "swatch");
  swatch.style.background = colours[team] || "#888";
  td.append(swatch, document.createTextNode(team));
  return td;
}

function fill(tableId, rows, emptyId) {
  const body = document.querySelector("#" + tableId + " tbody");
  body.replaceChildren(...rows);
  document.getElementById(emptyId).hidden = rows.length > 0;
}

function shown(count, total) {
  return total > count ? `(${count} of ${total})` : `(${total})`;
}

function money(value) {
  return value === null || value === undefined ? "-" : "$" + value.toFixed(2);
}

function draw(data) {
  const c = data.colours;
  document.getElementById("source").textContent = data.source;
  document.getElementById("running-count").textContent = `(${data.running.length})`;
  fill("running", data.running.map(j => {
    const tr = row([j.id, j.name, teamCell(j.team, c), j.owner, j.gpus.join(","), j.elapsed, j.left, j.util,
                    j.memory]);
    tr.dataset.job = j.id;
    return tr;
  }), "running-empty");
  document.getElementById("pending-count").textContent = shown(data.pending.length, data.pending_total);
  fill("pending", data.pending.map(j => {
    const tr = row([j.position === null ? "-" : j.position, j.id, j.name, teamCell(j.team, c), j.owner,
                    j.priority, j.gpus, j.waiting, j.eta, j.reason || j.status]);
    tr.dataset.job = j.id;
    return tr;
  }), "pending-empty");

  const outside = data.gpus.outside_text ? `; ${data.gpus.outside_text}` : "";
  document.getElementById("gpu-count").textContent = `(${data.gpus.in_use} of ${data.gpus.total} in use${outside})`;
  document.getElementById("gpus").replaceChildren(...data.gpus.cells.map(g => {
    const cell = el("div", null, "gpu" + (g.job ? " busy" : "") + (g.pool === "outside" ? " outside" : ""));
    cell.append(el("div", "GPU " + g.index + (g.pool === "on-demand" ? "" : " " + g.pool)));
    if (g.job) {
      cell.style.borderLeftColor = c[g.team] || "#888";
      cell.append(el("div", g.job + (g.util === "-" ? "" : " " + g.util)));
      cell.title = g.pool === "outside" ? `no longer the queue's: job ${g.job} of ${g.owner} (${g.team}) holds it until it ends`
        : `${g.type}: job ${g.job} of ${g.owner} (${g.team})`;
    } else {
      cell.append(el("div", "free"));
      cell.title = g.type;
    }
    return cell;
  }));

  document.getElementById("period").textContent = data.period ? `(spend in ${data.period})` : "";
  fill("teams", data.teams.map(t => {
    const gpus = t.gpus_in_use + (t.max_gpus === null ? "" : " of " + t.max_gpus);
    const tr = row([teamCell(t.team, c), gpus, money(t.spent), money(t.budget), t.used_text]);
    if (t.level) tr.className = t.level;
    return tr;
  }), "teams-note");
  fill("events", data.events.map(e => row([e.ago, e.id, e.name, e.status, e.reason])), "events-empty");

  drawPlots(data);
}

function drawPlots(data) {
  const box = document.getElementById("plots");
  const version = data.plots.map(p => p.url).join(" ");
  if (version === plotsVersion) return;
  plotsVersion = version;
  for (const old of box.querySelectorAll("img")) if (old.src) URL.revokeObjectURL(old.src);
  const note = document.getElementById("plots-note");
  note.hidden = true;
  box.replaceChildren(...data.plots.map(p => {
    const img = el("img");
    img.alt = p.title;
    img.dataset.plot = p.name;
    img.addEventListener("load", () => { img.dataset.loaded = `${img.naturalWidth}x${img.naturalHeight}`; });
    loadPlot(p, img, note);
    return img;
  }));
}

// fetched rather than left to the img element, so a figure the server cannot draw says why
async function loadPlot(plot, img, note) {
  try {
    const answer = await fetch(plot.url, {cache: "no-store"});
    if (!answer.ok) throw new Error(await answer.text());
    img.src = URL.createObjectURL(await answer.blob());
  } catch (e) {
    img.remove();
    const why = e instanceof TypeError ? "cannot reach gqa ui (stopped?)" : e.message;
    if (!note.textContent.includes(why)) note.textContent = note.hidden ? why : note.textContent + "; " + why;
    note.hidden = false;
  }
}

async function poll() {
  let wait = 3;
  const updated = document.getElementById("updated");
  const error = document.getElementById("error");
  try {
    const answer = await fetch("/api/snapshot", {cache: "no-store"});
    const data = await answer.json();
    wait = data.refresh || wait;
    if (!answer.ok) throw new Error(data.error || `the page's server answered ${answer.status}`);
    draw(data);
    error.hidden = true;
    updated.dataset.polls = String(Number(updated.dataset.polls) + 1);
    updated.textContent = "updated " + new Date(data.at * 1000).toLocaleTimeString();
  } catch (e) {
    error.textContent = e instanceof TypeError ? "cannot reach gqa ui (stopped?)" : e.message;
    error.hidden = false;
  }
  setTimeout(poll, wait * 1000);
}

poll();

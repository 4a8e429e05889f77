"""Writes dataset.json beside this file: the newcomer store for bench_newcomer.py.

124 memories as a model would author them through memory_author (a user's preferences, people,
five projects, events, todos, skills, lessons, and distractors that share words but answer
nothing asked), then 60 questions, each with the keys of the memories that answer it.
Deterministic: running it again writes the same file byte for byte.

    python benchmarks/newcomer/make_dataset.py
"""

# ruff: noqa: E501 (one memory or question a line: the contents are long strings)

import json
from pathlib import Path

M: list[dict] = []


def m(
    key: str,
    content: str,
    type: str = "info",
    importance: str = "MEDIUM",
    title: str | None = None,
    tags: tuple[str, ...] | list[str] = (),
    entities: tuple[str, ...] | list[str] = (),
    links: tuple[tuple[str, str], ...] | list[tuple[str, str]] = (),
) -> None:
    """Add one memory; `links` are (target key, relation) pairs to memories added before."""
    d = {"key": key, "content": content, "type": type, "importance": importance}
    if title:
        d["title"] = title
    if tags:
        d["tags"] = list(tags)
    if entities:
        d["entities"] = list(entities)
    if links:
        d["links"] = [{"target": t, "relation": r} for t, r in links]
    M.append(d)


# ---- preferences
m(
    "pref_editor",
    "The user writes code in Neovim with the LazyVim distribution; VS Code only for pairing sessions over Live Share.",
    title="Editor",
    tags=["preference", "editor"],
    entities=["user", "Neovim", "VS Code"],
    importance="HIGH",
)
m(
    "pref_shell",
    "The user's shell is fish with the starship prompt; scripts that must be portable are still written for bash.",
    title="Shell",
    tags=["preference", "shell"],
    entities=["user", "fish", "bash"],
)
m(
    "pref_lang",
    "The user's favourite language is Go for services; Python only for data work and quick scripts. Dislikes Java.",
    title="Languages",
    tags=["preference", "languages"],
    entities=["user", "Go", "Python"],
    importance="HIGH",
)
m(
    "pref_coffee",
    "The user drinks one flat white in the morning and switches to green tea (sencha) after noon; no caffeine after 3pm.",
    title="Coffee and tea",
    tags=["preference", "personal"],
    entities=["user"],
)
m(
    "pref_schedule",
    "The user does deep work 8:00-12:00 and does not want meetings before noon; afternoons are for reviews and calls.",
    title="Work schedule",
    tags=["preference", "schedule"],
    entities=["user"],
    importance="HIGH",
)
m(
    "pref_timezone",
    "The user lives in Lisbon (Europe/Lisbon, UTC+0 / UTC+1 in summer).",
    title="Time zone",
    tags=["personal"],
    entities=["user", "Lisbon"],
    importance="HIGH",
)
m(
    "pref_tabs",
    "The user wants 4-space indentation in Python and gofmt defaults in Go; never reformat files that are not part of the change.",
    title="Formatting",
    tags=["preference", "style"],
    entities=["user"],
)
m(
    "pref_commits",
    "The user writes commit messages in Conventional Commits style (feat:, fix:, chore:) and squashes before merging.",
    title="Commit style",
    tags=["preference", "git"],
    entities=["user", "git"],
)
m(
    "pref_tests",
    "The user prefers table-driven tests in Go and pytest parametrize in Python; asks that every bug fix comes with a regression test.",
    title="Testing style",
    tags=["preference", "testing"],
    entities=["user"],
)
m(
    "pref_explanations",
    "The user wants short answers: the diff first, then at most three sentences of why. No long preambles.",
    title="Answer style",
    tags=["preference", "communication"],
    entities=["user"],
    importance="HIGH",
)
m(
    "pref_os",
    "The user's work laptop is a MacBook Pro M3; the home server is a Debian 12 box called 'attic'.",
    title="Machines",
    tags=["setup"],
    entities=["user", "attic", "MacBook"],
)
m(
    "pref_music",
    "The user listens to lo-fi or Bach's cello suites while coding and finds podcasts distracting.",
    title="Music",
    tags=["personal"],
    entities=["user"],
    importance="LOW",
)
m(
    "pref_diet",
    "The user is vegetarian and allergic to cashews.",
    title="Diet",
    tags=["personal", "health"],
    entities=["user"],
    importance="HIGH",
)
m(
    "pref_keyboard",
    "The user types on a split ergonomic keyboard (ZSA Moonlander) with a Colemak-DH layout.",
    title="Keyboard",
    tags=["setup", "preference"],
    entities=["user", "Moonlander"],
    importance="LOW",
)
m(
    "pref_dark",
    "The user likes dark themes: Catppuccin Mocha in the terminal and the editor.",
    title="Theme",
    tags=["preference", "editor"],
    entities=["user"],
    importance="LOW",
)
m(
    "pref_pkg",
    "The user manages Python projects with uv, never plain pip; lockfiles are committed.",
    title="Python tooling",
    tags=["preference", "python"],
    entities=["user", "uv", "Python"],
)
m(
    "pref_notes",
    "The user keeps personal notes in Obsidian, synced through a private git repo.",
    title="Notes app",
    tags=["preference", "tools"],
    entities=["user", "Obsidian"],
    importance="LOW",
)
m(
    "pref_review",
    "When reviewing PRs the user wants blocking issues listed first, nits marked 'nit:' and grouped at the end.",
    title="Code review style",
    tags=["preference", "review"],
    entities=["user"],
)
m(
    "pref_run",
    "The user runs along the Tejo river on Tuesday and Thursday mornings at 7, before work.",
    title="Running",
    tags=["personal", "schedule"],
    entities=["user", "Lisbon"],
    importance="LOW",
)
m(
    "pref_lang_spoken",
    "The user is Nigerian-Portuguese, speaks English, Portuguese and some Yoruba; prefers English for work.",
    title="Spoken languages",
    tags=["personal"],
    entities=["user"],
)

# ---- people
m(
    "p_priya",
    "Priya Raman is the user's engineering manager at Fernbank; 1:1 every other Wednesday at 14:00.",
    title="Priya (manager)",
    tags=["people", "work"],
    entities=["Priya Raman", "Fernbank"],
    importance="HIGH",
)
m(
    "p_tomas",
    "Tomás Ferreira is the tech lead of Ledgerline and owns the database schema; ask him before any migration.",
    title="Tomás (Ledgerline lead)",
    tags=["people", "ledgerline"],
    entities=["Tomás Ferreira", "Ledgerline"],
    importance="HIGH",
)
m(
    "p_jun",
    "Jun Park is the designer the user works with on Pantry; Jun works from Seoul and prefers async feedback in Figma comments.",
    title="Jun (designer)",
    tags=["people", "pantry"],
    entities=["Jun Park", "Pantry", "Figma"],
)
m(
    "p_omar",
    "Omar Haddad is the SRE who runs the on-call rotation for the team and owns the Grafana dashboards.",
    title="Omar (SRE)",
    tags=["people", "ops"],
    entities=["Omar Haddad", "Grafana"],
)
m(
    "p_lena",
    "Lena Vogel is the product manager of Tidewatch; she decides priorities for the pipeline backlog.",
    title="Lena (PM)",
    tags=["people", "tidewatch"],
    entities=["Lena Vogel", "Tidewatch"],
)
m(
    "p_sam",
    "Sam is the user's partner; they share the apartment in Alfama and a dog named Pimenta.",
    title="Sam (partner)",
    tags=["people", "personal"],
    entities=["Sam", "Pimenta"],
    importance="HIGH",
)
m(
    "p_kofi",
    "Kofi Mensah is a freelance client: the user builds a booking site for his surf school in Ericeira on weekends.",
    title="Kofi (client)",
    tags=["people", "freelance"],
    entities=["Kofi Mensah", "Ericeira"],
)
m(
    "p_ines",
    "Inês Costa is the new junior engineer on the team; the user mentors her, pairing on Fridays.",
    title="Inês (mentee)",
    tags=["people", "work", "mentoring"],
    entities=["Inês Costa"],
)
m(
    "p_mum",
    "The user's mother, Adaeze, lives in Porto; her birthday is 12 March.",
    title="Mother",
    tags=["people", "family"],
    entities=["Adaeze", "Porto"],
    importance="HIGH",
)
m(
    "p_dave",
    "Dave Kowalski from the security team reviews anything touching auth or secrets.",
    title="Dave (security)",
    tags=["people", "security"],
    entities=["Dave Kowalski"],
)
m(
    "p_team",
    "The user's team at Fernbank is called Payments Platform: six engineers, one SRE, one PM.",
    title="The team",
    tags=["work", "team"],
    entities=["Fernbank", "Payments Platform"],
)
m(
    "p_fernbank",
    "The user works at Fernbank, a fintech in Lisbon, as a senior backend engineer since 2023.",
    title="Employer",
    tags=["work"],
    entities=["user", "Fernbank"],
    importance="HIGH",
)

# ---- project: Ledgerline (Go billing service)
m(
    "l_what",
    "Ledgerline is the team's billing service at Fernbank: Go 1.22, PostgreSQL 16, gRPC API consumed by the checkout.",
    title="Ledgerline overview",
    tags=["project", "ledgerline"],
    entities=["Ledgerline", "PostgreSQL", "gRPC"],
    importance="HIGH",
)
m(
    "l_repo",
    "Ledgerline's repo is fernbank/ledgerline on GitHub; main is protected and needs two approvals.",
    title="Ledgerline repo",
    tags=["project", "ledgerline", "git"],
    entities=["Ledgerline", "GitHub"],
)
m(
    "l_queue_old",
    "Decision (Feb 2026): Ledgerline will publish invoice events through RabbitMQ.",
    title="Ledgerline event bus",
    tags=["project", "ledgerline", "decision"],
    entities=["Ledgerline", "RabbitMQ"],
)
m(
    "l_queue_new",
    "Decision revised (May 2026): Ledgerline publishes invoice events to Kafka instead of RabbitMQ, because the data team already consumes Kafka.",
    title="Ledgerline event bus (revised)",
    tags=["project", "ledgerline", "decision"],
    entities=["Ledgerline", "Kafka", "RabbitMQ"],
    importance="HIGH",
    links=[("l_queue_old", "contradicts")],
)
m(
    "l_money",
    "Ledgerline stores money as integer minor units (cents) with an ISO 4217 currency code; never floats.",
    title="Money representation",
    tags=["project", "ledgerline", "convention"],
    entities=["Ledgerline"],
    importance="HIGH",
)
m(
    "l_deploy",
    "To deploy Ledgerline: merge to main, wait for the CI image, then run `make release ENV=prod` from the ops repo; Argo CD rolls it out. Check the Grafana 'ledgerline-errors' panel for 15 minutes.",
    type="skill",
    title="Deploy Ledgerline",
    tags=["procedure", "ledgerline", "deploy"],
    entities=["Ledgerline", "Argo CD", "Grafana"],
    importance="HIGH",
)
m(
    "l_migrate",
    "To run a Ledgerline schema migration: write it with goose in db/migrations, get Tomás's approval, apply on staging with `make migrate ENV=staging`, then prod during the Thursday window.",
    type="skill",
    title="Ledgerline migrations",
    tags=["procedure", "ledgerline", "database"],
    entities=["Ledgerline", "goose", "Tomás Ferreira"],
)
m(
    "l_window",
    "Production changes to Ledgerline's database are only allowed in the Thursday 10:00-11:00 maintenance window.",
    title="Ledgerline maintenance window",
    tags=["project", "ledgerline", "policy"],
    entities=["Ledgerline"],
)
m(
    "l_incident",
    "Incident 2026-04-17: Ledgerline double-charged 312 customers after a retry loop in the payment webhook; fixed with an idempotency key on webhook ids.",
    type="episode",
    title="Double-charge incident",
    tags=["incident", "ledgerline"],
    entities=["Ledgerline"],
    importance="HIGH",
)
m(
    "l_idem",
    "Every Ledgerline webhook handler must check the idempotency key table before side effects.",
    title="Webhook idempotency rule",
    tags=["project", "ledgerline", "convention"],
    entities=["Ledgerline"],
    links=[("l_incident", "derived_from")],
)
m(
    "l_tax_old",
    "Ledgerline computes VAT with its own rate table in tax/rates.go.",
    title="VAT computation",
    tags=["project", "ledgerline"],
    entities=["Ledgerline"],
)
m(
    "l_tax_new",
    "Ledgerline no longer keeps its own VAT table: since June 2026 rates come from the Taxually API, cached for 24 hours.",
    title="VAT computation (revised)",
    tags=["project", "ledgerline", "decision"],
    entities=["Ledgerline", "Taxually"],
    links=[("l_tax_old", "refines")],
)
m(
    "l_local",
    "To run Ledgerline locally: `docker compose up db kafka`, then `go run ./cmd/ledgerline --config dev.yaml`.",
    type="skill",
    title="Run Ledgerline locally",
    tags=["procedure", "ledgerline"],
    entities=["Ledgerline", "Docker"],
)
m(
    "l_flaky",
    "TestInvoiceRollover in Ledgerline is flaky around midnight UTC because it uses time.Now; skip it in CI until fixed.",
    title="Flaky test",
    tags=["project", "ledgerline", "testing"],
    entities=["Ledgerline"],
)
m(
    "l_perf",
    "Ledgerline's p99 latency for CreateInvoice is about 180 ms; the SLO is 300 ms.",
    title="Ledgerline latency",
    tags=["project", "ledgerline", "performance"],
    entities=["Ledgerline"],
)
m(
    "l_lint",
    "Ledgerline uses golangci-lint with the config in .golangci.yml; CI fails on any lint error.",
    title="Ledgerline lint",
    tags=["project", "ledgerline"],
    entities=["Ledgerline", "golangci-lint"],
    importance="LOW",
)

# ---- project: Pantry (personal recipe app)
m(
    "pa_what",
    "Pantry is the user's side project: a recipe and grocery-list app in React Native with Expo, backed by Supabase.",
    title="Pantry overview",
    tags=["project", "pantry"],
    entities=["Pantry", "React Native", "Expo", "Supabase"],
    importance="HIGH",
)
m(
    "pa_state_old",
    "Pantry uses Redux Toolkit for app state.",
    title="Pantry state management",
    tags=["project", "pantry", "decision"],
    entities=["Pantry", "Redux"],
)
m(
    "pa_state_new",
    "Pantry dropped Redux Toolkit for Zustand in March 2026: far less boilerplate for a small app.",
    title="Pantry state management (revised)",
    tags=["project", "pantry", "decision"],
    entities=["Pantry", "Zustand", "Redux"],
    links=[("pa_state_old", "contradicts")],
)
m(
    "pa_name",
    "Pantry's App Store name will be 'Pantry Pal' because 'Pantry' was taken.",
    title="Pantry store name",
    tags=["project", "pantry"],
    entities=["Pantry", "App Store"],
)
m(
    "pa_ocr",
    "Pantry scans receipts with on-device OCR (Apple Vision on iOS, ML Kit on Android) to add groceries automatically.",
    title="Receipt scanning",
    tags=["project", "pantry", "feature"],
    entities=["Pantry", "ML Kit"],
)
m(
    "pa_release",
    "Pantry beta went to 40 TestFlight testers on 2026-09-05.",
    type="episode",
    title="Pantry beta",
    tags=["project", "pantry", "release"],
    entities=["Pantry", "TestFlight"],
)
m(
    "pa_build",
    "To ship a Pantry build: bump version in app.json, run `eas build --platform all`, then `eas submit`; release notes live in CHANGELOG.md.",
    type="skill",
    title="Ship a Pantry build",
    tags=["procedure", "pantry"],
    entities=["Pantry", "EAS"],
)
m(
    "pa_units",
    "Pantry stores ingredient quantities in metric and converts to cups only in the UI, per user setting.",
    title="Pantry units",
    tags=["project", "pantry", "convention"],
    entities=["Pantry"],
    importance="LOW",
)
m(
    "pa_price_old",
    "Pantry will be a one-time purchase at 4.99 EUR.",
    title="Pantry pricing",
    tags=["project", "pantry", "decision"],
    entities=["Pantry"],
)
m(
    "pa_price_new",
    "Pantry pricing changed: free with an optional 1.99 EUR/month subscription for sync across devices, instead of the one-time purchase.",
    title="Pantry pricing (revised)",
    tags=["project", "pantry", "decision"],
    entities=["Pantry"],
    links=[("pa_price_old", "refines")],
)
m(
    "pa_bug",
    "Known Pantry bug: the shopping list loses checked items when the app is killed on Android 14; suspect AsyncStorage write not awaited.",
    title="Pantry Android bug",
    tags=["project", "pantry", "bug"],
    entities=["Pantry", "Android"],
)

# ---- project: Tidewatch (data pipeline at work)
m(
    "t_what",
    "Tidewatch is Fernbank's fraud-signal pipeline: Python 3.12, Airflow DAGs that load transactions into BigQuery nightly.",
    title="Tidewatch overview",
    tags=["project", "tidewatch"],
    entities=["Tidewatch", "Airflow", "BigQuery", "Python"],
    importance="HIGH",
)
m(
    "t_schedule",
    "The Tidewatch nightly DAG starts at 02:00 UTC and must finish before 06:00 for the fraud team's morning report.",
    title="Tidewatch schedule",
    tags=["project", "tidewatch"],
    entities=["Tidewatch", "Airflow"],
)
m(
    "t_backfill",
    "To backfill Tidewatch: `airflow dags backfill tidewatch_nightly -s START -e END --reset-dagruns`, at most 7 days at a time to stay under BigQuery slot quota.",
    type="skill",
    title="Tidewatch backfill",
    tags=["procedure", "tidewatch"],
    entities=["Tidewatch", "Airflow", "BigQuery"],
)
m(
    "t_orch_old",
    "Tidewatch will migrate from Airflow to Dagster in Q3 2026.",
    title="Tidewatch orchestrator",
    tags=["project", "tidewatch", "decision"],
    entities=["Tidewatch", "Dagster", "Airflow"],
)
m(
    "t_orch_new",
    "The Dagster migration for Tidewatch was cancelled in July 2026; the team stays on Airflow 2 and upgrades it instead.",
    title="Tidewatch orchestrator (revised)",
    tags=["project", "tidewatch", "decision"],
    entities=["Tidewatch", "Airflow", "Dagster"],
    importance="HIGH",
    links=[("t_orch_old", "contradicts")],
)
m(
    "t_pii",
    "Tidewatch must hash card numbers (PAN) with the KMS key before anything lands in BigQuery; raw PANs are never stored.",
    title="PII rule",
    tags=["project", "tidewatch", "security"],
    entities=["Tidewatch", "KMS", "BigQuery"],
    importance="CRITICAL",
)
m(
    "t_cost",
    "Tidewatch's BigQuery bill was about 2,100 EUR in August 2026, mostly from full-table scans in the features query.",
    title="Tidewatch cost",
    tags=["project", "tidewatch", "cost"],
    entities=["Tidewatch", "BigQuery"],
)
m(
    "t_partition",
    "Tidewatch's transactions table should be partitioned by event_date and clustered by merchant_id to cut scan cost.",
    title="Partitioning plan",
    tags=["project", "tidewatch", "decision"],
    entities=["Tidewatch", "BigQuery"],
    links=[("t_cost", "derived_from")],
)
m(
    "t_fail",
    "2026-08-22: the Tidewatch DAG failed because an upstream export from the card processor arrived 3 hours late; added a sensor with a 4-hour timeout.",
    type="episode",
    title="Tidewatch late upstream",
    tags=["incident", "tidewatch"],
    entities=["Tidewatch", "Airflow"],
)
m(
    "t_owner",
    "Tidewatch's alerts go to the #tidewatch-alerts Slack channel; the user is secondary on-call for it.",
    title="Tidewatch alerts",
    tags=["project", "tidewatch", "ops"],
    entities=["Tidewatch", "Slack"],
)

# ---- project: garden sensor (hobby)
m(
    "g_what",
    "The user's hobby project 'Sprout' is a soil-moisture sensor for the balcony plants: ESP32-C3 running Rust (esp-hal), reporting over MQTT to Home Assistant on attic.",
    title="Sprout overview",
    tags=["project", "sprout", "hobby"],
    entities=["Sprout", "ESP32", "Rust", "Home Assistant", "attic"],
)
m(
    "g_battery",
    "Sprout runs about 5 months on two AA batteries with deep sleep between readings every 30 minutes.",
    title="Sprout battery life",
    tags=["project", "sprout"],
    entities=["Sprout"],
)
m(
    "g_calib",
    "Sprout's sensor reads 2,950 in dry air and 1,350 in water; those are the calibration bounds for 0-100%.",
    title="Sprout calibration",
    tags=["project", "sprout"],
    entities=["Sprout"],
)
m(
    "g_flash",
    "To flash Sprout: hold BOOT, plug USB-C, then `cargo run --release` (espflash runner configured in .cargo/config.toml).",
    type="skill",
    title="Flash Sprout",
    tags=["procedure", "sprout"],
    entities=["Sprout", "espflash"],
)
m(
    "g_plants",
    "The balcony has basil, a lemon tree and three tomato plants; the lemon tree needs the least water.",
    title="Balcony plants",
    tags=["personal", "sprout"],
    entities=["Sprout"],
    importance="LOW",
)

# ---- project: Kofi's surf school site (freelance)
m(
    "k_stack",
    "Kofi's surf-school booking site is built with Astro and a Stripe Checkout integration, hosted on Netlify.",
    title="Surf site stack",
    tags=["project", "freelance"],
    entities=["Kofi Mensah", "Astro", "Stripe", "Netlify"],
)
m(
    "k_rate",
    "The user charges Kofi 60 EUR per hour, invoiced monthly.",
    title="Freelance rate",
    tags=["freelance", "money"],
    entities=["Kofi Mensah"],
)
m(
    "k_deadline",
    "Kofi wants the booking site live before the summer season, by 2026-05-15.",
    title="Surf site deadline",
    tags=["freelance", "deadline"],
    entities=["Kofi Mensah"],
)
m(
    "k_launch",
    "The surf-school site launched on 2026-05-12; first week brought 37 bookings.",
    type="episode",
    title="Surf site launch",
    tags=["freelance", "release"],
    entities=["Kofi Mensah"],
)

# ---- events / episodes
m(
    "e_conf",
    "The user gave a talk 'Idempotency in payment systems' at GoLab Florence on 2026-10-20.",
    type="episode",
    title="GoLab talk",
    tags=["event", "talk"],
    entities=["user", "GoLab"],
)
m(
    "e_dentist",
    "The user has a dentist appointment on 2026-12-15 at 09:30 with Dr. Almeida in Chiado.",
    type="episode",
    title="Dentist",
    tags=["event", "health"],
    entities=["Dr. Almeida", "Chiado"],
)
m(
    "e_vacation",
    "The user is on vacation in Cape Verde from 2026-12-20 to 2027-01-04 and will be offline.",
    type="episode",
    title="Vacation",
    tags=["event", "personal"],
    entities=["user", "Cape Verde"],
    importance="HIGH",
)
m(
    "e_laptop",
    "The user's laptop SSD died on 2026-07-03; restored from Time Machine, lost one day of uncommitted work.",
    type="episode",
    title="Laptop failure",
    tags=["event", "setup"],
    entities=["MacBook"],
)
m(
    "e_promo",
    "The user was promoted to senior engineer in January 2026 after the Ledgerline rewrite.",
    type="episode",
    title="Promotion",
    tags=["event", "career"],
    entities=["user", "Fernbank"],
)
m(
    "e_offsite",
    "The team offsite is in Sintra on 2026-11-18 and 19; the user is organising the hack day session.",
    type="episode",
    title="Team offsite",
    tags=["event", "team"],
    entities=["Payments Platform", "Sintra"],
)
m(
    "e_pimenta_vet",
    "Pimenta had her vaccination at the vet on 2026-09-30; next booster due in a year.",
    type="episode",
    title="Dog vet visit",
    tags=["event", "personal"],
    entities=["Pimenta"],
    importance="LOW",
)
m(
    "e_review",
    "In the mid-year review (2026-07-10) Priya asked the user to delegate more and to write more design docs.",
    type="episode",
    title="Mid-year review",
    tags=["event", "career"],
    entities=["Priya Raman"],
)
m(
    "e_pair",
    "Paired with Inês on 2026-11-27 on her first Ledgerline PR; she struggled with Go contexts and cancellation.",
    type="episode",
    title="Pairing with Inês",
    tags=["event", "mentoring"],
    entities=["Inês Costa", "Ledgerline"],
)

# ---- todos
m(
    "td_design",
    "Write the design doc for Ledgerline multi-currency settlement before the end of December.",
    type="todo",
    title="Multi-currency design doc",
    tags=["todo", "ledgerline"],
    entities=["Ledgerline"],
    importance="HIGH",
)
m(
    "td_gift",
    "Buy a birthday present for Sam (turns 34 on 2027-01-22): they mentioned wanting a film camera.",
    type="todo",
    title="Gift for Sam",
    tags=["todo", "personal"],
    entities=["Sam"],
)
m(
    "td_slides",
    "Upload the GoLab slides to Speaker Deck and send the link to the organisers.",
    type="todo",
    title="Upload slides",
    tags=["todo"],
    entities=["GoLab"],
    importance="LOW",
)
m(
    "td_flaky",
    "Fix TestInvoiceRollover by injecting a clock instead of calling time.Now.",
    type="todo",
    title="Fix flaky test",
    tags=["todo", "ledgerline", "testing"],
    entities=["Ledgerline"],
    links=[("l_flaky", "related")],
)
m(
    "td_partition",
    "Open a PR that partitions the Tidewatch transactions table; ask Lena to schedule it.",
    type="todo",
    title="Partition PR",
    tags=["todo", "tidewatch"],
    entities=["Tidewatch", "Lena Vogel"],
    links=[("t_partition", "part_of")],
)
m(
    "td_renew",
    "Renew the Portuguese citizen card (Cartão de Cidadão) before it expires in February 2027.",
    type="todo",
    title="Renew ID card",
    tags=["todo", "personal", "admin"],
    entities=["user"],
    importance="HIGH",
)
m(
    "td_kofi_invoice",
    "Send Kofi the November invoice (14 hours).",
    type="todo",
    title="Invoice Kofi",
    tags=["todo", "freelance"],
    entities=["Kofi Mensah"],
)
m(
    "td_battery",
    "Order a 3D-printed weatherproof case for the second Sprout sensor.",
    type="todo",
    title="Sprout case",
    tags=["todo", "sprout"],
    entities=["Sprout"],
    importance="LOW",
)

# ---- skills / procedures (generic)
m(
    "s_vpn",
    "To reach Fernbank's internal services from home: `tailscale up --accept-routes`, then log in with the Okta device flow.",
    type="skill",
    title="Work VPN",
    tags=["procedure", "setup"],
    entities=["Tailscale", "Okta", "Fernbank"],
)
m(
    "s_dotfiles",
    "The user's dotfiles are in github.com/mokafor/dotfiles, installed with chezmoi: `chezmoi init --apply mokafor`.",
    type="skill",
    title="Dotfiles",
    tags=["setup", "procedure"],
    entities=["chezmoi", "GitHub"],
)
m(
    "s_psql",
    "To get a read-only psql shell on Ledgerline prod: `ops db-shell ledgerline --ro`; it needs an approved access request in Opal, valid 4 hours.",
    type="skill",
    title="Prod database access",
    tags=["procedure", "ledgerline", "database"],
    entities=["Ledgerline", "Opal", "PostgreSQL"],
)
m(
    "s_rotate",
    "To rotate the Stripe webhook secret: create the new secret in the Stripe dashboard, put it in Vault at secret/ledgerline/stripe, restart pods, then delete the old one after 24 hours.",
    type="skill",
    title="Rotate Stripe secret",
    tags=["procedure", "security", "ledgerline"],
    entities=["Stripe", "Vault", "Ledgerline"],
)
m(
    "s_oncall",
    "On-call handover happens Mondays at 10:00; the outgoing person writes a summary in the #payments-oncall channel.",
    type="skill",
    title="On-call handover",
    tags=["procedure", "ops", "team"],
    entities=["Payments Platform", "Slack"],
)
m(
    "s_profile",
    "To profile a Go service: add net/http/pprof, hit /debug/pprof/profile?seconds=30, open with `go tool pprof -http=:8080`.",
    type="skill",
    title="Profile Go",
    tags=["procedure", "go", "performance"],
    entities=["Go", "pprof"],
)

# ---- reflections / lessons
m(
    "r_migrations",
    "Lesson: schema migrations that add a NOT NULL column must be split into add-nullable, backfill, then set NOT NULL; twice a one-step migration locked a big table.",
    type="reflection",
    title="Safe migrations",
    tags=["lesson", "database"],
    entities=["PostgreSQL"],
    importance="HIGH",
)
m(
    "r_estimates",
    "Lesson: the user's estimates for freelance work run about 1.5x over; quote accordingly.",
    type="reflection",
    title="Estimates",
    tags=["lesson", "freelance"],
    entities=["user"],
)
m(
    "r_async",
    "Lesson: Jun responds faster to Loom videos than to long written specs.",
    type="reflection",
    title="Working with Jun",
    tags=["lesson", "pantry"],
    entities=["Jun Park"],
)

# ---- distractors: generic user/project/team facts that share words but answer nothing asked
m(
    "d_user_github",
    "The user's GitHub handle is mokafor.",
    title="GitHub handle",
    tags=["personal"],
    entities=["user", "GitHub"],
)
m(
    "d_team_standup",
    "The team's daily standup is at 12:15 on Google Meet, 15 minutes.",
    title="Standup",
    tags=["team", "schedule"],
    entities=["Payments Platform"],
)
m(
    "d_team_retro",
    "The team holds a retro every second Friday; the user facilitates in rotation.",
    title="Retro",
    tags=["team"],
    entities=["Payments Platform"],
    importance="LOW",
)
m(
    "d_project_board",
    "All work projects are tracked in Linear; the user's side projects are tracked in GitHub Projects.",
    title="Project tracking",
    tags=["project", "tools"],
    entities=["Linear", "GitHub"],
)
m(
    "d_user_likes_docs",
    "The user likes when the project README has a 'Quick start' section at the top.",
    title="README preference",
    tags=["preference", "project"],
    entities=["user"],
    importance="LOW",
)
m(
    "d_team_slack",
    "The team's main Slack channel is #payments-platform; urgent pages go through PagerDuty.",
    title="Team channels",
    tags=["team", "ops"],
    entities=["Slack", "PagerDuty", "Payments Platform"],
)
m(
    "d_user_book",
    "The user is reading 'Designing Data-Intensive Applications' for the second time.",
    title="Reading",
    tags=["personal"],
    entities=["user"],
    importance="LOW",
)
m(
    "d_project_ci",
    "All of the user's work projects use GitHub Actions for CI; runners are self-hosted on Fernbank's k8s cluster.",
    title="CI",
    tags=["project", "ci"],
    entities=["GitHub Actions", "Fernbank"],
)
m(
    "d_user_language_learning",
    "The user practises Japanese on Duolingo for 10 minutes a day.",
    title="Learning Japanese",
    tags=["personal"],
    entities=["user", "Duolingo"],
    importance="LOW",
)
m(
    "d_team_hiring",
    "The team is hiring a second SRE; the user sits on the interview panel for system design.",
    title="Hiring",
    tags=["team", "work"],
    entities=["Payments Platform"],
)
m(
    "d_user_bike",
    "The user commutes by electric bike; the office is in Cais do Sodré.",
    title="Commute",
    tags=["personal"],
    entities=["user", "Cais do Sodré"],
    importance="LOW",
)
m(
    "d_project_license",
    "The user's open-source side projects are MIT licensed.",
    title="License",
    tags=["project", "oss"],
    entities=["user"],
    importance="LOW",
)
m(
    "d_ledgerline_docs",
    "Ledgerline's API docs are generated from the proto files with buf and published to the internal portal.",
    title="Ledgerline docs",
    tags=["project", "ledgerline", "docs"],
    entities=["Ledgerline", "buf"],
)
m(
    "d_pantry_icon",
    "Jun delivered the Pantry app icon: a green jar on cream background.",
    title="Pantry icon",
    tags=["project", "pantry", "design"],
    entities=["Pantry", "Jun Park"],
    importance="LOW",
)
m(
    "d_tidewatch_dash",
    "Tidewatch has a Looker Studio dashboard for the fraud team, maintained by Lena's analyst.",
    title="Tidewatch dashboard",
    tags=["project", "tidewatch"],
    entities=["Tidewatch", "Looker Studio"],
    importance="LOW",
)
m(
    "d_user_coffee_machine",
    "The office coffee machine on floor 3 is broken more often than not; the user walks to the café downstairs.",
    title="Office coffee",
    tags=["work", "personal"],
    entities=["Fernbank"],
    importance="TRIVIAL",
)
m(
    "d_team_lunch",
    "The team goes out for lunch together on Fridays, usually to the Time Out Market.",
    title="Team lunch",
    tags=["team"],
    entities=["Payments Platform"],
    importance="LOW",
)
m(
    "d_user_meeting_notes",
    "The user asked that meeting notes be written in bullet points with owners and dates for every action item.",
    title="Meeting notes format",
    tags=["preference", "meetings"],
    entities=["user"],
)
m(
    "d_ledgerline_oncall_rotation",
    "Ledgerline's on-call rotation has five engineers; each shift is one week.",
    title="Ledgerline on-call",
    tags=["project", "ledgerline", "ops"],
    entities=["Ledgerline"],
)
m(
    "d_pantry_supabase_region",
    "Pantry's Supabase project is in the eu-west-2 region on the free tier.",
    title="Pantry backend region",
    tags=["project", "pantry"],
    entities=["Pantry", "Supabase"],
    importance="LOW",
)

Q: list[dict] = []


def q(text: str, *answers: str) -> None:
    """Add one question and the keys of the memories that answer it."""
    Q.append({"q": text, "answers": list(answers)})


q("which editor should I assume when suggesting keybindings?", "pref_editor")
q("what does she drink in the afternoon?", "pref_coffee")
q("can I schedule a sync with the user at 10am?", "pref_schedule")
q("what time zone is the user in?", "pref_timezone")
q("how long should my replies be?", "pref_explanations")
q("how should I format commit messages for this user?", "pref_commits")
q("anything to avoid when ordering food for the offsite dinner?", "pref_diet")
q("how do I install dependencies in their Python repos — pip?", "pref_pkg")
q("how does she like code review comments organised?", "pref_review")
q("who is the user's boss?", "p_priya")
q("who do I need to ask before changing the billing database tables?", "p_tomas", "l_migrate")
q("how should I give feedback to the designer?", "p_jun", "r_async")
q("who handles on-call and the dashboards?", "p_omar")
q("who sets priorities for the fraud pipeline?", "p_lena")
q("what's the name of the dog?", "p_sam")
q("when is mom's birthday?", "p_mum")
q("who needs to look at a change to the login flow?", "p_dave")
q("which message broker does the billing service use for invoice events?", "l_queue_new")
q("should I use float64 for amounts in Ledgerline?", "l_money")
q("how do I ship Ledgerline to production?", "l_deploy")
q("when am I allowed to touch the prod database?", "l_window")
q("what went wrong with duplicate charges in April?", "l_incident")
q("where do VAT rates come from now?", "l_tax_new")
q("how to start the billing service on my machine", "l_local")
q("why does the invoice rollover test fail in CI sometimes?", "l_flaky")
q("is CreateInvoice within its latency target?", "l_perf")
q("what state management library does the recipe app use?", "pa_state_new")
q("what will the grocery app be called in the App Store?", "pa_name")
q("how much will Pantry cost?", "pa_price_new")
q("how do I publish a new version of the mobile app?", "pa_build")
q("when did the beta testers get the app?", "pa_release")
q("checked items vanish on Android after closing the app — known issue?", "pa_bug")
q("what orchestrator will the fraud pipeline run on going forward?", "t_orch_new")
q("how do I rerun the nightly job for last week?", "t_backfill")
q("can raw card numbers go into the warehouse?", "t_pii")
q("why was the BigQuery bill so high?", "t_cost")
q("what happened when the card processor export was late?", "t_fail")
q("by when must the nightly fraud load be done?", "t_schedule")
q("what microcontroller does the plant sensor use?", "g_what")
q("what raw values correspond to completely dry and wet soil?", "g_calib")
q("how do I put new firmware on the moisture sensor?", "g_flash")
q("how much do I bill the surf school guy?", "k_rate")
q("when did Kofi's site go live and how did it do?", "k_launch")
q("what was my talk in Italy about?", "e_conf")
q("when is my next dental checkup?", "e_dentist")
q("will the user be reachable over New Year?", "e_vacation")
q("what feedback did my manager give me in the summer review?", "e_review")
q("where is the team offsite?", "e_offsite")
q("what did Inês find hard in our last pairing session?", "e_pair")
q("what do I still owe on the multi-currency settlement work?", "td_design")
q("gift ideas for my partner's birthday?", "td_gift")
q("which official documents do I need to renew soon?", "td_renew")
q("how do I connect to the company network from home?", "s_vpn")
q("how do I set up my dotfiles on a new laptop?", "s_dotfiles")
q("how can I query the production billing data read-only?", "s_psql")
q("steps to change the Stripe webhook signing secret", "s_rotate")
q("adding a required column to a large table — what's the safe way?", "r_migrations")
q("how much padding should I add to a freelance quote?", "r_estimates")
q("which keyboard layout does the user type on?", "pref_keyboard")
q("the CPU is pegged on a Go service, how do I find the hot path?", "s_profile")

keys = [x["key"] for x in M]
assert len(set(keys)) == len(keys)
for x in Q:
    for a in x["answers"]:
        assert a in keys, a
with open(Path(__file__).resolve().parent / "dataset.json", "w", encoding="utf-8") as f:
    json.dump({"memories": M, "questions": Q}, f, indent=1, ensure_ascii=False)
print(len(M), "memories", len(Q), "questions")

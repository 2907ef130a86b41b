//! Text recognition (OCR) of scanned PDF pages and of images, with Debian's Tesseract on
//! page images rendered by poppler's `pdftoppm`.
//!
//! Both programs parse hostile bytes (an upload is anybody's file), so they run only in
//! the code sandbox (`docchat_sandbox`: no network, a read-only system, the run's
//! workspace the only writable place, limits on time, memory and processes), never in
//! this process, one page at a time: a page that fails or runs out of time is recorded
//! and skipped, and the rest of the document is read. Each ingest-service replica has its
//! own sandbox with `DOCCHAT_OCR_SLOTS` runs at once, shared fairly between the jobs'
//! owners. docs/ingestion.md, "Scanned documents and images", is the operator's side.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use docchat_common::config::Config;
use docchat_sandbox::{CodeOutput, CodeRunner, CodeSpec, UserDisk};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::metrics;

/// The most address space one render or recognition may use.
const MEMORY_BYTES: u64 = 1536 << 20;
/// Pages are rendered at this resolution (what Tesseract is trained for)...
const DPI: f32 = 300.0;
/// ... unless the long side would pass this many pixels (a poster-sized page, or a
/// hostile `/MediaBox`): then at the resolution that fits.
const MAX_SIDE_PX: f32 = 4200.0;
/// A multi-page TIFF is recognized in one run with a page's time for each frame, up to this
/// many frames' worth (a fax of a few dozen pages reads whole; a file of thousands of frames
/// cannot hold a slot for days).
const MAX_TIFF_FRAMES: u32 = 100;
/// Where Debian (and other systems) keep Tesseract's languages, newest first.
const TESSDATA_DIRS: &[&str] = &[
    "/usr/share/tesseract-ocr/5/tessdata",
    "/usr/share/tesseract-ocr/4.00/tessdata",
    "/usr/share/tessdata",
    "/usr/local/share/tessdata",
];

/// One page's recognition: its text, or why it could not be read.
pub type PageText = Result<String, Unread>;

/// Why a page (or image) has no text: what went wrong, and whether it was the time limit
/// (the metrics count those apart).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unread {
    pub why: String,
    pub timed_out: bool,
}

impl Unread {
    fn timed_out(why: String) -> Unread {
        Unread {
            why,
            timed_out: true,
        }
    }

    /// The page's outcome as the metrics label it: `ok`, `timeout` or `failed`.
    fn outcome(text: &PageText) -> &'static str {
        match text {
            Ok(_) => "ok",
            Err(Unread {
                timed_out: true, ..
            }) => "timeout",
            Err(_) => "failed",
        }
    }
}

impl From<String> for Unread {
    fn from(why: String) -> Unread {
        Unread {
            why,
            timed_out: false,
        }
    }
}

impl std::fmt::Display for Unread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

/// Text recognition as this replica can run it.
pub struct Ocr {
    runner: Arc<dyn CodeRunner>,
    /// Workspaces of the runs, one per document being read.
    scratch: PathBuf,
    /// Why recognition cannot run here (switched off, no sandbox, a program missing).
    unavailable: Option<String>,
    tesseract: PathBuf,
    pdftoppm: PathBuf,
    tessdata: PathBuf,
    /// The languages installed (`eng`, `deu`, ...), sorted.
    languages: Vec<String>,
    default_language: String,
    page_time: Duration,
    parallel: usize,
}

impl Ocr {
    /// Recognition with `config`'s settings (`DOCCHAT_OCR*`), in a sandbox of its own
    /// (`DOCCHAT_SANDBOX` chooses its backend, as for the agent's code).
    pub async fn start(config: &Config) -> Ocr {
        let slots = config.ocr_slots.clamp(1, 64);
        let page_time = Duration::from_secs(config.ocr_page_seconds.clamp(5, 3600));
        let runner: Arc<dyn CodeRunner> = if config.ocr == "off" {
            Arc::new(docchat_sandbox::NoSandbox("text recognition is off".into()))
        } else {
            let settings = docchat_sandbox::Mode::parse(&config.sandbox).map(|mode| {
                docchat_sandbox::Settings {
                    mode,
                    dir: config.data_dir.join("ingest").join("sandbox"),
                    slots,
                    user_slots: slots,
                    // The longest run: a multi-page TIFF's (each run says its own).
                    max_run: page_time * MAX_TIFF_FRAMES,
                    // A document's file and one page image at a time.
                    workspace_quota: 2 << 30,
                    // Above the agent's slot uids (at most 1024 of them): a run of one
                    // sandbox never shares a uid with a run of the other.
                    uid_base: config.sandbox_uid_base.max(1000) + 1024,
                    helper: config.sandbox_helper.clone(),
                }
            });
            Arc::new(docchat_sandbox::Sandbox::start(settings).await)
        };
        Ocr::with_runner(config, runner)
    }

    /// Recognition through `runner` (tests give theirs).
    pub fn with_runner(config: &Config, runner: Arc<dyn CodeRunner>) -> Ocr {
        let page_time = Duration::from_secs(config.ocr_page_seconds.clamp(5, 3600));
        let tesseract = program("tesseract");
        let pdftoppm = program("pdftoppm");
        let tessdata = TESSDATA_DIRS
            .iter()
            .map(PathBuf::from)
            .find(|d| d.join("eng.traineddata").is_file() || !installed(d).is_empty())
            .unwrap_or_else(|| PathBuf::from(TESSDATA_DIRS[0]));
        let languages = installed(&tessdata);
        let unavailable = if config.ocr == "off" {
            Some("text recognition is off (DOCCHAT_OCR=off)".to_owned())
        } else if !runner.available() {
            Some("text recognition needs the sandbox, which is unavailable here".to_owned())
        } else if tesseract.is_none() || pdftoppm.is_none() {
            Some(
                "text recognition needs Debian's tesseract-ocr and poppler-utils \
                 (scripts/sandbox-runtime.sh installs them)"
                    .to_owned(),
            )
        } else if languages.is_empty() {
            Some(format!(
                "text recognition has no language installed in {}",
                tessdata.display()
            ))
        } else {
            None
        };
        match &unavailable {
            Some(why) => tracing::warn!(reason = %why, "scanned pages and images will not be read"),
            None => tracing::info!(
                languages = %languages.join(","),
                slots = config.ocr_slots,
                "text recognition of scanned pages and images"
            ),
        }
        Ocr {
            runner,
            scratch: config.data_dir.join("ingest").join("ocr"),
            unavailable,
            tesseract: tesseract.unwrap_or_else(|| PathBuf::from("tesseract")),
            pdftoppm: pdftoppm.unwrap_or_else(|| PathBuf::from("pdftoppm")),
            tessdata,
            languages,
            default_language: config.ocr_language.clone(),
            page_time,
            parallel: usize::try_from(config.ocr_slots.clamp(1, 64)).unwrap_or(1),
        }
    }

    /// Why recognition cannot run on this replica, if it cannot.
    pub fn unavailable(&self) -> Option<&str> {
        self.unavailable.as_deref()
    }

    /// The languages to recognize: `asked` (`deu`, `eng+deu`; empty: the configured
    /// default), each installed here.
    ///
    /// # Errors
    ///
    /// A language that is not installed, with the ones that are.
    pub fn language(&self, asked: &str) -> Result<String, String> {
        let asked = match asked.trim() {
            "" => self.default_language.trim(),
            a => a,
        };
        let wanted: Vec<&str> = asked.split('+').map(str::trim).collect();
        if wanted.iter().any(|l| l.is_empty() || !valid_name(l)) {
            return Err(format!(
                "tesseract_lang {asked:?} is not a language list like eng or eng+deu"
            ));
        }
        // Where recognition cannot run, the language does not matter yet: the pages say why
        // they were not read.
        if self.unavailable.is_none()
            && let Some(missing) = wanted
                .iter()
                .find(|l| !self.languages.iter().any(|i| i == *l))
        {
            return Err(format!(
                "tesseract_lang {missing:?} is not installed here (installed: {}; Debian's \
                 tesseract-ocr-<lang> packages add more)",
                self.languages.join(", ")
            ));
        }
        Ok(wanted.join("+"))
    }

    /// Recognizes `pages` of `pdf` (numbers and sizes in points), at most the configured
    /// number at once, calling `done` with the count read so far after each; the texts
    /// come back in the order of `pages`.
    pub async fn pdf_pages(
        &self,
        owner: &str,
        pdf: &[u8],
        pages: &[(u32, (f32, f32))],
        language: &str,
        done: impl Fn(usize) + Send + Sync,
    ) -> Vec<(u32, PageText)> {
        if let Some(why) = &self.unavailable {
            return pages
                .iter()
                .map(|(n, _)| (*n, Err(why.clone().into())))
                .collect();
        }
        let workspace = match Workspace::with_file(&self.scratch, "input.pdf", pdf).await {
            Ok(w) => w,
            Err(e) => {
                return pages
                    .iter()
                    .map(|(n, _)| (*n, Err(e.clone().into())))
                    .collect();
            }
        };
        let finished = AtomicUsize::new(0);
        let read = futures::stream::iter(pages.iter().copied())
            .map(|(number, size)| {
                let (workspace, finished, done) = (&workspace, &finished, &done);
                async move {
                    // A directory of its own per page: a run is handed its workspace (its
                    // slot's uid owns it), so two runs never share one.
                    let text = match workspace.page(number).await {
                        Ok(dir) => {
                            let text = self.pdf_page(owner, &dir, number, size, language).await;
                            let _ = tokio::fs::remove_dir_all(&dir).await;
                            text
                        }
                        Err(e) => Err(e.into()),
                    };
                    done(finished.fetch_add(1, Ordering::Relaxed) + 1);
                    (number, text)
                }
            })
            .buffered(self.parallel)
            .collect()
            .await;
        workspace.remove().await;
        read
    }

    /// One page: rendered to a grey PNG, then recognized.
    async fn pdf_page(
        &self,
        owner: &str,
        workspace: &Path,
        number: u32,
        (width, height): (f32, f32),
        language: &str,
    ) -> PageText {
        let started = Instant::now();
        let long_side = width.max(height).max(1.0);
        let dpi = DPI.min(MAX_SIDE_PX * 72.0 / long_side).max(10.0).floor();
        let image = format!("page-{number}");
        let render = vec![
            self.pdftoppm.display().to_string(),
            "-r".into(),
            format!("{dpi}"),
            // PGM, not PNG: encoding a 300 dpi page as PNG took seconds, more than
            // recognizing it; Tesseract reads PGM as it is (told the resolution).
            "-gray".into(),
            "-singlefile".into(),
            "-f".into(),
            number.to_string(),
            "-l".into(),
            number.to_string(),
            "input.pdf".into(),
            image.clone(),
        ];
        let rendered = self
            .run(
                owner,
                workspace,
                render,
                "rendering the page",
                self.page_time,
            )
            .await
            .map(|_| ());
        let text = match rendered {
            Ok(()) => {
                self.recognize(
                    owner,
                    workspace,
                    &format!("{image}.pgm"),
                    language,
                    Some(dpi),
                    self.page_time,
                )
                .await
            }
            Err(e) => Err(e),
        };
        metrics::ocr_page(Unread::outcome(&text), started.elapsed());
        text
    }

    /// Recognizes an image file (PNG, JPEG, TIFF, WebP): its frames' texts in order (a
    /// multi-page TIFF has several).
    ///
    /// # Errors
    ///
    /// Why it could not be read (the decoder refused it, a limit stopped it).
    pub async fn image(
        &self,
        owner: &str,
        bytes: &[u8],
        extension: &str,
        language: &str,
    ) -> Result<Vec<String>, String> {
        if let Some(why) = &self.unavailable {
            return Err(why.clone());
        }
        let name = format!("input.{}", safe_extension(extension));
        let workspace = Workspace::with_file(&self.scratch, &name, bytes).await?;
        let started = Instant::now();
        // Tesseract reads every frame of a TIFF in the one run: a page's time for each.
        let limit = self.page_time * tiff_frames(bytes).min(MAX_TIFF_FRAMES);
        let text = self
            .recognize(owner, workspace.path(), &name, language, None, limit)
            .await;
        metrics::ocr_page(Unread::outcome(&text), started.elapsed());
        workspace.remove().await;
        // Tesseract ends each frame's text with a form feed.
        let mut pages: Vec<String> = text
            .map_err(|e| e.why)?
            .split('\x0c')
            .map(str::to_owned)
            .collect();
        if pages.len() > 1 && pages.last().is_some_and(|p| p.trim().is_empty()) {
            pages.pop();
        }
        Ok(pages)
    }

    /// Tesseract on `image` in `workspace` (`dpi`: its resolution, where the image's header
    /// does not say it) within `limit`: the text it read.
    async fn recognize(
        &self,
        owner: &str,
        workspace: &Path,
        image: &str,
        language: &str,
        dpi: Option<f32>,
        limit: Duration,
    ) -> PageText {
        let mut argv = vec![
            // One thread per run: pages run side by side instead (Tesseract's advice for
            // throughput), and the sandbox's process limit holds.
            "/usr/bin/env".into(),
            "OMP_THREAD_LIMIT=1".into(),
            self.tesseract.display().to_string(),
            "--tessdata-dir".into(),
            self.tessdata.display().to_string(),
        ];
        if let Some(dpi) = dpi {
            argv.extend(["--dpi".to_owned(), format!("{dpi}")]);
        }
        argv.extend([
            image.to_owned(),
            "stdout".into(),
            "-l".into(),
            language.to_owned(),
        ]);
        self.run(owner, workspace, argv, "recognizing the text", limit)
            .await
    }

    /// One sandboxed run within `limit`: its standard output, or what went wrong while
    /// `doing` it.
    async fn run(
        &self,
        owner: &str,
        workspace: &Path,
        argv: Vec<String>,
        doing: &str,
        limit: Duration,
    ) -> PageText {
        let spec = CodeSpec {
            argv,
            workspace: workspace.to_path_buf(),
            stdin: None,
            wall_clock: limit,
            memory_bytes: Some(MEMORY_BYTES),
            documents: None,
            user: owner.to_owned(),
            disk: UserDisk::default(),
        };
        // Dropped (the job canceled or its worker stopping): the run is killed.
        let cancel = CancellationToken::new();
        let _stop = cancel.clone().drop_guard();
        match self.runner.run(spec, &cancel).await {
            Ok(out) => outcome(out, doing, limit),
            Err(e) => Err(format!("{doing}: the sandbox refused the run: {e}").into()),
        }
    }
}

/// A run's output as a page's text or the reason it has none.
fn outcome(out: CodeOutput, doing: &str, limit: Duration) -> PageText {
    if out.timed_out {
        return Err(Unread::timed_out(format!(
            "{doing} took longer than {} s",
            limit.as_secs()
        )));
    }
    if out.cancelled {
        return Err(format!("{doing} was canceled").into());
    }
    match out.exit_code {
        Some(0) => Ok(out.stdout),
        code => {
            let why = out
                .stderr
                .lines()
                .map(str::trim)
                .rfind(|l| !l.is_empty())
                .map(|l| l.chars().take(200).collect::<String>());
            Err(match (why, code) {
                (Some(why), _) => format!("{doing} failed: {why}"),
                (None, Some(code)) => format!("{doing} failed (exit code {code})"),
                (None, None) => format!("{doing} was stopped by a limit (memory or time)"),
            }
            .into())
        }
    }
}

/// A run's directory under the scratch directory, holding the document's file.
struct Workspace(PathBuf);

impl Workspace {
    async fn with_file(scratch: &Path, name: &str, bytes: &[u8]) -> Result<Workspace, String> {
        let dir = scratch.join(docchat_common::ids::new_id());
        let prepare = async {
            tokio::fs::create_dir_all(&dir).await?;
            tokio::fs::write(dir.join(name), bytes).await
        };
        match prepare.await {
            Ok(()) => Ok(Workspace(dir)),
            Err(e) => {
                let _ = tokio::fs::remove_dir_all(&dir).await;
                Err(format!("cannot prepare the recognition's workspace: {e}"))
            }
        }
    }

    fn path(&self) -> &Path {
        &self.0
    }

    /// A directory for page `number`'s runs holding the document (a hard link to it, a
    /// copy where links cannot be made).
    async fn page(&self, number: u32) -> Result<PathBuf, String> {
        let dir = self.0.join(format!("p{number}"));
        let document = self.0.join("input.pdf");
        let made = async {
            tokio::fs::create_dir_all(&dir).await?;
            if tokio::fs::hard_link(&document, dir.join("input.pdf"))
                .await
                .is_err()
            {
                tokio::fs::copy(&document, dir.join("input.pdf")).await?;
            }
            std::io::Result::Ok(())
        };
        made.await
            .map(|()| dir)
            .map_err(|e| format!("cannot prepare the page's workspace: {e}"))
    }

    async fn remove(self) {
        if let Err(e) = tokio::fs::remove_dir_all(&self.0).await {
            tracing::warn!(dir = %self.0.display(), error = %e, "recognition workspace left behind");
        }
    }
}

/// How many frames (pages) a TIFF holds, by its chain of image directories; 1 for anything
/// else. Only offsets and counts are read (bounds-checked, each directory once), never an
/// image: decoding stays in the sandbox.
fn tiff_frames(bytes: &[u8]) -> u32 {
    let Some(header) = bytes.get(..4) else {
        return 1;
    };
    let big_endian = match &header[..2] {
        b"II" => false,
        b"MM" => true,
        _ => return 1,
    };
    let number = |at: usize, width: usize| -> Option<u64> {
        let raw = bytes.get(at..at.checked_add(width)?)?;
        Some(raw.iter().enumerate().fold(0u64, |n, (i, b)| {
            let shift = if big_endian { width - 1 - i } else { i } * 8;
            n | u64::from(*b) << shift
        }))
    };
    // Classic TIFF (42): 4-byte offsets, 2-byte entry counts, 12-byte entries; BigTIFF (43):
    // 8, 8 and 20.
    let (offset_width, count_width, entry_width, first) = match number(2, 2) {
        Some(42) => (4, 2, 12, 4),
        Some(43) => (8, 8, 20, 8),
        _ => return 1,
    };
    let mut seen = std::collections::HashSet::new();
    let mut at = number(first, offset_width);
    let mut frames = 0u32;
    while let Some(offset) = at.filter(|&o| o != 0) {
        let Ok(offset) = usize::try_from(offset) else {
            break;
        };
        if !seen.insert(offset) || frames > MAX_TIFF_FRAMES {
            break;
        }
        let Some(entries) = number(offset, count_width).and_then(|n| usize::try_from(n).ok())
        else {
            break;
        };
        frames += 1;
        let next = entries
            .checked_mul(entry_width)
            .and_then(|n| n.checked_add(offset + count_width));
        at = next.and_then(|n| number(n, offset_width));
    }
    frames.max(1)
}

/// The languages of `tessdata` (its `*.traineddata` files but `osd`, which detects
/// orientation), sorted.
fn installed(tessdata: &Path) -> Vec<String> {
    let mut languages: Vec<String> = std::fs::read_dir(tessdata)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_suffix(".traineddata")
                .map(str::to_owned)
        })
        .filter(|l| l != "osd" && valid_name(l))
        .collect();
    languages.sort();
    languages
}

/// A language name as Tesseract's files are named (`eng`, `chi_sim`, `deu_latf`).
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `ext` if it is a plain extension, else `img` (the decoders look at the bytes).
fn safe_extension(ext: &str) -> String {
    let ext = ext.to_ascii_lowercase();
    if !ext.is_empty() && ext.len() <= 5 && ext.bytes().all(|b| b.is_ascii_alphanumeric()) {
        ext
    } else {
        "img".into()
    }
}

/// The program `name` on the usual system paths (the sandbox shows the same ones).
fn program(name: &str) -> Option<PathBuf> {
    ["/usr/bin", "/bin", "/usr/local/bin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_run_says_what_failed() {
        let limit = Duration::from_secs(9);
        let out = |exit_code, stderr: &str| CodeOutput {
            exit_code,
            stderr: stderr.into(),
            ..CodeOutput::default()
        };
        assert_eq!(
            outcome(
                CodeOutput {
                    exit_code: Some(0),
                    stdout: "text".into(),
                    ..CodeOutput::default()
                },
                "x",
                limit
            ),
            Ok("text".into())
        );
        assert_eq!(
            outcome(
                out(
                    Some(1),
                    "Error in pixReadStream\nLeptonica Error: image too big\n\n"
                ),
                "recognizing",
                limit
            ),
            Err("recognizing failed: Leptonica Error: image too big"
                .to_owned()
                .into())
        );
        assert_eq!(
            outcome(out(None, ""), "rendering", limit),
            Err("rendering was stopped by a limit (memory or time)"
                .to_owned()
                .into())
        );
        let timed = CodeOutput {
            timed_out: true,
            ..CodeOutput::default()
        };
        assert_eq!(
            outcome(timed, "rendering", limit),
            Err(Unread::timed_out("rendering took longer than 9 s".into()))
        );
    }

    /// Recognition through `runner` with English installed, 9 s a page, `parallel` at once,
    /// its workspaces under `scratch`.
    fn test_ocr(runner: Arc<dyn CodeRunner>, scratch: &Path, parallel: usize) -> Ocr {
        Ocr {
            runner,
            scratch: scratch.join("ocr"),
            unavailable: None,
            tesseract: "/usr/bin/tesseract".into(),
            pdftoppm: "/usr/bin/pdftoppm".into(),
            tessdata: "/tessdata".into(),
            languages: vec!["eng".into()],
            default_language: "eng".into(),
            page_time: Duration::from_secs(9),
            parallel,
        }
    }

    /// Renders instantly, "recognizes" `text of <image>`, and times out rendering page 2.
    struct Scripted(std::sync::Mutex<Vec<Vec<String>>>);

    #[async_trait::async_trait]
    impl CodeRunner for Scripted {
        async fn run(&self, spec: CodeSpec, _: &CancellationToken) -> Result<CodeOutput, String> {
            assert!(
                spec.workspace.join("input.pdf").is_file(),
                "the document is in the workspace"
            );
            assert_eq!(spec.memory_bytes, Some(MEMORY_BYTES));
            self.0.lock().unwrap().push(spec.argv.clone());
            let argv = spec.argv.join(" ");
            Ok(if argv.contains("pdftoppm") && argv.contains("-f 2 ") {
                CodeOutput {
                    timed_out: true,
                    ..CodeOutput::default()
                }
            } else if argv.contains("pdftoppm") {
                CodeOutput {
                    exit_code: Some(0),
                    ..CodeOutput::default()
                }
            } else {
                let image = spec
                    .argv
                    .iter()
                    .find(|a| a.ends_with(".pgm"))
                    .cloned()
                    .unwrap_or_default();
                CodeOutput {
                    exit_code: Some(0),
                    stdout: format!("text of {image}"),
                    ..CodeOutput::default()
                }
            })
        }
    }

    #[tokio::test]
    async fn pages_are_read_one_by_one_and_a_failed_one_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let runner = Arc::new(Scripted(std::sync::Mutex::new(Vec::new())));
        let ocr = test_ocr(runner.clone(), dir.path(), 2);
        let seen = std::sync::Mutex::new(Vec::new());
        let letter = (612.0, 792.0);
        // A poster-sized page renders at the resolution that keeps it under MAX_SIDE_PX.
        let poster = (612.0 * 8.0, 792.0 * 8.0);
        let read = ocr
            .pdf_pages(
                "alice",
                b"%PDF-1.7",
                &[(1, letter), (2, letter), (3, poster)],
                "eng",
                |n| seen.lock().unwrap().push(n),
            )
            .await;
        assert_eq!(read[0], (1, Ok("text of page-1.pgm".to_owned())));
        assert_eq!(
            read[1],
            (
                2,
                Err(Unread::timed_out(
                    "rendering the page took longer than 9 s".into()
                ))
            )
        );
        assert_eq!(read[2], (3, Ok("text of page-3.pgm".to_owned())));
        // The metrics' labels come from the outcome, not from its message's wording.
        let labels: Vec<_> = read.iter().map(|(_, t)| Unread::outcome(t)).collect();
        assert_eq!(labels, ["ok", "timeout", "ok"]);
        assert_eq!(
            Unread::outcome(&Err("took longer than a rewording".to_owned().into())),
            "failed"
        );
        let mut seen = seen.into_inner().unwrap();
        seen.sort_unstable();
        assert_eq!(seen, [1, 2, 3], "progress after each page");
        let runs = runner.0.lock().unwrap().clone();
        assert_eq!(runs.len(), 5, "three renders, two recognitions: {runs:?}");
        let dpi = |page: &str| {
            let render = runs
                .iter()
                .find(|a| a.contains(&"-f".to_owned()) && a.contains(&page.to_owned()))
                .unwrap();
            render[render.iter().position(|a| a == "-r").unwrap() + 1].clone()
        };
        assert_eq!(dpi("1"), "300");
        assert_eq!(dpi("3"), "47", "4200 px over 8 × 11 in");
        let recognize = runs
            .iter()
            .find(|a| a.contains(&"stdout".to_owned()))
            .unwrap();
        assert!(
            recognize.starts_with(&["/usr/bin/env".to_owned(), "OMP_THREAD_LIMIT=1".to_owned()]),
            "{recognize:?}"
        );
        assert_eq!(
            std::fs::read_dir(dir.path().join("ocr")).unwrap().count(),
            0,
            "the workspace is removed"
        );
        // Where recognition cannot run, every page says why.
        let off = Ocr {
            unavailable: Some("text recognition is off".into()),
            ..ocr
        };
        let read = off
            .pdf_pages("alice", b"%PDF", &[(4, letter)], "eng", |_| {})
            .await;
        assert_eq!(
            read,
            [(4, Err("text recognition is off".to_owned().into()))]
        );
    }

    /// A TIFF of `frames` image directories of `entries` entries each (no image data: only
    /// the chain is read).
    fn tiff(big_endian: bool, bigtiff: bool, frames: usize, entries: usize) -> Vec<u8> {
        let put = |out: &mut Vec<u8>, n: u64, width: usize| {
            let bytes = n.to_le_bytes();
            let mut field = bytes[..width].to_vec();
            if big_endian {
                field.reverse();
            }
            out.extend(field);
        };
        let (offset_width, count_width, entry_width) =
            if bigtiff { (8, 8, 20) } else { (4, 2, 12) };
        let mut out = if big_endian {
            b"MM".to_vec()
        } else {
            b"II".to_vec()
        };
        put(&mut out, if bigtiff { 43 } else { 42 }, 2);
        if bigtiff {
            put(&mut out, 8, 2);
            put(&mut out, 0, 2);
        }
        let start = out.len() + offset_width;
        put(&mut out, start as u64, offset_width);
        let ifd = count_width + entries * entry_width + offset_width;
        for f in 0..frames {
            put(&mut out, entries as u64, count_width);
            out.extend(vec![0xAB; entries * entry_width]);
            let next = if f + 1 == frames {
                0
            } else {
                start + (f + 1) * ifd
            };
            put(&mut out, next as u64, offset_width);
        }
        out
    }

    #[test]
    fn a_tiffs_frames_are_counted_by_its_directories() {
        for big_endian in [false, true] {
            for bigtiff in [false, true] {
                for frames in [1, 2, 7] {
                    assert_eq!(
                        tiff_frames(&tiff(big_endian, bigtiff, frames, 9)),
                        u32::try_from(frames).unwrap(),
                        "big endian {big_endian}, BigTIFF {bigtiff}"
                    );
                }
            }
        }
        let fixture = include_bytes!("../tests/fixtures/ocr/pages.tiff");
        assert_eq!(tiff_frames(fixture), 2, "the two-page fixture");
        // Hostile chains end: a loop back to the first directory, a count past the end, an
        // offset past the end, thousands of frames.
        let mut looped = tiff(false, false, 2, 3);
        let last = looped.len() - 4;
        looped[last..].copy_from_slice(&8u32.to_le_bytes());
        assert_eq!(tiff_frames(&looped), 2);
        let mut huge = tiff(false, false, 1, 3);
        huge[8..10].copy_from_slice(&u16::MAX.to_le_bytes());
        assert_eq!(tiff_frames(&huge), 1);
        let mut away = tiff(false, false, 1, 3);
        away[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(tiff_frames(&away), 1);
        assert_eq!(
            tiff_frames(&tiff(true, true, 5000, 1)),
            MAX_TIFF_FRAMES + 1,
            "counting stops past the limit"
        );
        for other in [
            &b""[..],
            b"II",
            b"II*",
            b"\x89PNG\r\n\x1a\n",
            b"MM\x00\x2c\x00\x00\x00\x08",
        ] {
            assert_eq!(tiff_frames(other), 1, "{other:?}");
        }
    }

    /// Records each run's time limit and reads `page one` and `page two` as two frames.
    struct Frames(std::sync::Mutex<Vec<Duration>>);

    #[async_trait::async_trait]
    impl CodeRunner for Frames {
        async fn run(&self, spec: CodeSpec, _: &CancellationToken) -> Result<CodeOutput, String> {
            self.0.lock().unwrap().push(spec.wall_clock);
            Ok(CodeOutput {
                exit_code: Some(0),
                stdout: "page one\n\x0cpage two\n\x0c".into(),
                ..CodeOutput::default()
            })
        }
    }

    #[tokio::test]
    async fn a_multi_page_tiff_has_a_pages_time_for_each_frame() {
        let dir = tempfile::tempdir().unwrap();
        let runner = Arc::new(Frames(std::sync::Mutex::new(Vec::new())));
        let ocr = test_ocr(runner.clone(), dir.path(), 1);
        let seven = tiff(false, false, 7, 4);
        let pages = ocr.image("alice", &seven, "tiff", "eng").await.unwrap();
        assert_eq!(pages, ["page one\n", "page two\n"]);
        ocr.image("alice", b"\x89PNG\r\n\x1a\n", "png", "eng")
            .await
            .unwrap();
        ocr.image("alice", &tiff(false, true, 5000, 1), "tiff", "eng")
            .await
            .unwrap();
        assert_eq!(
            *runner.0.lock().unwrap(),
            [
                Duration::from_secs(63),
                Duration::from_secs(9),
                Duration::from_secs(9) * MAX_TIFF_FRAMES
            ]
        );
    }

    #[test]
    fn extensions_and_languages_are_plain_names() {
        assert_eq!(safe_extension("TIFF"), "tiff");
        assert_eq!(safe_extension("../x"), "img");
        assert!(valid_name("chi_sim") && !valid_name("eng;rm") && !valid_name(""));
    }
}

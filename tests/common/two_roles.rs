//! The two-role mbarrier pipeline kernels of the role tests (`role_unrolled`,
//! `persistent_roles`, `role_release`, `role_alignment`, `role_shapes`, `mbar_period`,
//! `mbar_counters`): one builder for the frame they share, each test writing only the two
//! roles' bodies.
//!
//! The frame: `%X`, `%Y` of `rows × width` f32; a producer group of threads
//! `[0, producers)` and a consumer group after it; `@buf` of `slots × width` f32 (pinned at
//! byte 0 with a twin `@alias` where asked); `@full` and `@empty` mbarrier arrays of `slots`,
//! initialised by thread 0 (`full` for one arrival, `empty` for the consumers) before a block
//! barrier; then, after any prologue lines and optionally inside an outer loop, the role branch: the producer arm (its body
//! under `if %t == 0` where elected), the consumer arm.
//!
//! Text only: the builder neither parses nor checks what the bodies say.

/// A two-role mbarrier pipeline kernel (module doc); [`TwoRoles::text`] writes it. The
/// bodies are lines ending in a newline.
pub struct TwoRoles {
    /// The kernel's name (without `@`).
    pub name: &'static str,
    /// Rows of `%X` and `%Y`.
    pub rows: i64,
    /// Elements of a slot and of a row of `%X`, `%Y`.
    pub width: u32,
    /// Further parameters, before `%X` (`%K: i32, `) and after `%Y` (`, %n: i32`).
    pub leading: String,
    pub params: String,
    /// Threads of the producer group, then of the consumer group.
    pub producers: u32,
    pub consumers: u32,
    pub slots: u32,
    /// The arrival count of each `@empty` (the consumers when `None`).
    pub empty: Option<u32>,
    /// Initialise slot by slot (`full[0]`, `empty[0]`, `full[1]`, …) rather than array by
    /// array (every `full`, then every `empty`).
    pub inits_by_slot: bool,
    /// `@buf` pinned at byte 0, with `@alias` of the same type at the same bytes.
    pub alias: bool,
    /// Lines after the barrier, before the outer loop and the role branch.
    pub prologue: String,
    /// The lines that define the role condition `%isp`.
    pub role: String,
    /// The producer's body runs in thread 0 of its role only (`%elect = cmp eq %t, 0`).
    pub elect: bool,
    /// A loop around the role branch: its head line(s) (ending in `{`, then lines of its
    /// body before the branch) and the lines of its body after the branch.
    pub outer: Option<(String, String)>,
    pub producer: String,
    pub consumer: String,
}

impl Default for TwoRoles {
    /// examples/tma-warp-specialized.kir's frame: `@ws`, 8 rows of 256, 32 producer and 256
    /// consumer threads, 2 slots, an elected producer, no outer loop, empty bodies.
    fn default() -> Self {
        TwoRoles {
            name: "ws",
            rows: 8,
            width: 256,
            leading: String::new(),
            params: String::new(),
            producers: 32,
            consumers: 256,
            slots: 2,
            empty: None,
            inits_by_slot: false,
            alias: false,
            prologue: String::new(),
            role: "%isp = in_group @producer".into(),
            elect: true,
            outer: None,
            producer: String::new(),
            consumer: String::new(),
        }
    }
}

impl TwoRoles {
    /// The kernel's text.
    pub fn text(&self) -> String {
        let (w, p, s) = (self.width, self.producers, self.slots);
        let block = p + self.consumers;
        let array = |name: &str| format!("{name} : f32[{}, {w}]", s);
        let buf = match self.alias {
            true => format!(
                "shared {} at 0\nshared {} at 0\n",
                array("@buf"),
                array("@alias")
            ),
            false => format!("shared {}\n", array("@buf")),
        };
        let (outer_head, outer_tail) = match &self.outer {
            Some((h, t)) => (format!("{h}\n"), format!("{t}}}\n")),
            None => (String::new(), String::new()),
        };
        let producer = match self.elect {
            true => format!("%elect = cmp eq %t, 0\nif %elect {{\n{}}}\n", self.producer),
            false => self.producer.clone(),
        };
        format!(
            "kernel @{name}({leading}%X: global f32[{rows}, {w}], %Y: global f32[{rows}, {w}]{params}) block({block}) {{
group @producer : threads [0, {p})
group @consumers : threads [{p}, {block})
{buf}shared @full : mbarrier[{s}]
shared @empty : mbarrier[{s}]
%t = tid.x
%lead = cmp eq %t, 0
if %lead {{
{inits}}}
barrier
{prologue}{outer_head}{role}
if %isp {{
{producer}}} else {{
{consumer}}}
{outer_tail}}}
",
            name = self.name,
            leading = self.leading,
            prologue = self.prologue,
            rows = self.rows,
            params = self.params,
            inits = self.inits(),
            role = self.role,
            consumer = self.consumer,
        )
    }

    /// Thread 0's `mbar_init`s (module doc).
    fn inits(&self) -> String {
        let count = self.empty.unwrap_or(self.consumers);
        let full = |j| format!("mbar_init @full[{j}], 1\n");
        let empty = |j| format!("mbar_init @empty[{j}], {count}\n");
        match self.inits_by_slot {
            true => (0..self.slots).map(|j| full(j) + &empty(j)).collect(),
            false => (0..self.slots)
                .map(full)
                .chain((0..self.slots).map(empty))
                .collect(),
        }
    }
}

/// The consumer thread's index `%c` from 0 and its reversed lane `%rev` in a slot of
/// `width` (the lines that open most consumer bodies).
pub fn consumer_lanes(producers: u32, width: u32) -> String {
    format!("%c = sub %t, {producers}\n%rev = sub {}, %c\n", width - 1)
}

/// One slot, one use per trip of a 3-trip tile loop around the role branch (parity
/// `%tile rem 2`): the elected producer refills `@buf` by TMA, 64 consumers read it through
/// `view` (`@buf`, or `@alias` where `alias` pins the twin) and arrive on `empty` after
/// their read, or before it where `early`.
pub fn one_slot_tile_loop(view: &str, alias: bool, early: bool) -> String {
    let (before, after) = match early {
        true => ("mbar_arrive @empty[0]\n", ""),
        false => ("", "mbar_arrive @empty[0]\n"),
    };
    TwoRoles {
        name: "one",
        rows: 4,
        width: 64,
        consumers: 64,
        slots: 1,
        alias,
        outer: Some((
            "for %tile = 0 to 3 step 1 {\n%par = rem %tile, 2".into(),
            String::new(),
        )),
        producer: "%free = xor %par, 1\nmbar_wait @empty[0], %free\n%v = view @buf[0]\n\
                   mbar_arrive @full[0] tx 256\ntma_load %v <- %X[%tile, 0], @full[0]\n"
            .into(),
        consumer: format!(
            "{}%v = view {view}[0]\nmbar_wait @full[0], %par\n{before}%x = load %v[%rev]\n\
             {after}%y = exp %x\ngstore %Y[%tile, %c], %y\n",
            consumer_lanes(32, 64)
        ),
        ..TwoRoles::default()
    }
    .text()
}

//! `SessionState` and its summary (spec §3.1, compat notes §1.8).

use crate::message::BaseMessage;
use crate::number::Num;
use crate::raw::RawJson;
use crate::timestamp::Timestamp;

json_object! {
    /// The resumable state of one session: `{schema_version, session_id, updated_at, run_id?,
    /// invoke_seq?, messages, meta?}`. Also the shape of a legacy `state/<id>.json` snapshot
    /// (where `schema_version` may be missing).
    pub struct SessionState {
        /// Format version (`1`); legacy snapshots may omit it.
        "schema_version" => schema_version: opt Num,
        /// Session id.
        "session_id" => session_id: req String,
        /// Last save time.
        "updated_at" => updated_at: req Timestamp,
        /// Last run id.
        "run_id" => run_id: opt String,
        /// Last `llm.request.seq` used; the next run continues from it.
        "invoke_seq" => invoke_seq: opt i64,
        /// Durable conversation history (startup system context stripped).
        "messages" => messages: req Vec<BaseMessage>,
        /// Session meta (`codelia_workspace_root`, `codelia_resume_context`, todos, …).
        "meta" => meta: opt RawJson,
    }
}

json_object! {
    /// One entry of a session listing: `{session_id, updated_at, run_id?, message_count?,
    /// last_user_message?, workspace_root?}`.
    pub struct SessionStateSummary {
        /// Session id.
        "session_id" => session_id: req String,
        /// Last save time.
        "updated_at" => updated_at: req Timestamp,
        /// Last run id.
        "run_id" => run_id: opt String,
        /// Number of messages, all roles.
        "message_count" => message_count: opt u64,
        /// Display rendering of the last user message.
        "last_user_message" => last_user_message: opt String,
        /// Trimmed `meta.codelia_workspace_root`.
        "workspace_root" => workspace_root: opt String,
    }
}

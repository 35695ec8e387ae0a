//! Tools that are not files of the agent folder: Rust tools an embedder
//! registers, and tools that MCP connections bring. They reach the model
//! beside the agent's server tools and run under the same rules: the input
//! is validated against the schema first, approvals and dry runs apply,
//! and every failure is an error result the model can read.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use agentkit_manifest::Approval;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::tools::{ToolContext, ToolOutput};

/// What the model and the deterministic-call route know about a tool.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// A JSON Schema object for the input.
    pub input_schema: Value,
    /// Safe to run in a dry-run session.
    pub read_only: bool,
    pub needs_approval: Approval,
}

/// A boxed tool result.
pub type ToolFuture = Pin<Box<dyn Future<Output = ToolOutput> + Send>>;

/// A tool with a Rust implementation.
pub trait DynTool: Send + Sync + fmt::Debug {
    fn spec(&self) -> &ToolSpec;
    /// Runs the tool on an input already validated against the schema.
    /// `ctx.cancel` fires when the turn is interrupted.
    fn call(&self, input: Value, ctx: ToolContext) -> ToolFuture;
}

/// The tools a [`ToolSource`] lists.
pub type ToolsFuture<'a> = Pin<Box<dyn Future<Output = Vec<Arc<dyn DynTool>>> + Send + 'a>>;

/// A source of tools resolved when a turn starts (an MCP connection lists
/// its tools then; a fixed list is a source too).
pub trait ToolSource: Send + Sync + fmt::Debug {
    /// The tools for a turn or call of `session_id` (empty for a call
    /// outside any session).
    fn tools<'a>(&'a self, session_id: &'a str) -> ToolsFuture<'a>;
}

impl ToolSource for Vec<Arc<dyn DynTool>> {
    fn tools<'a>(&'a self, _session_id: &'a str) -> ToolsFuture<'a> {
        let tools = self.clone();
        Box::pin(async move { tools })
    }
}

type Handler = dyn Fn(Value, ToolContext) -> ToolFuture + Send + Sync;

/// A tool written in Rust with a typed input: the schema comes from the
/// input type (`schemars`), the input is deserialised for the handler, and
/// the handler's `Ok` value (anything `Serialize`) is the result; `Err` is
/// an error result with that message.
///
/// ```
/// use agentkit_harness::RustTool;
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Input { city: String }
/// let tool = RustTool::new("forecast", "Forecast for a city", |input: Input, _ctx| async move {
///     Ok::<_, String>(serde_json::json!({"city": input.city, "sky": "clear"}))
/// });
/// assert_eq!(agentkit_harness::DynTool::spec(&tool).name, "forecast");
/// ```
#[derive(Clone)]
pub struct RustTool {
    spec: ToolSpec,
    handler: Arc<Handler>,
}

impl fmt::Debug for RustTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RustTool")
            .field("spec", &self.spec)
            .finish()
    }
}

impl RustTool {
    pub fn new<I, O, F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        handler: F,
    ) -> RustTool
    where
        I: DeserializeOwned + schemars::JsonSchema + Send + 'static,
        O: Serialize + 'static,
        F: Fn(I, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, String>> + Send + 'static,
    {
        let mut schema = schemars::schema_for!(I).to_value();
        if let Some(obj) = schema.as_object_mut() {
            // The model sees the schema; the meta keys only cost tokens.
            obj.remove("$schema");
            obj.remove("title");
        }
        let handler = Arc::new(handler);
        let run = move |input: Value, ctx: ToolContext| -> ToolFuture {
            let handler = handler.clone();
            Box::pin(async move {
                let typed: I = match serde_json::from_value(input) {
                    Ok(typed) => typed,
                    Err(e) => return ToolOutput::error(format!("invalid input: {e}")),
                };
                match handler(typed, ctx).await {
                    Ok(value) => match serde_json::to_value(value) {
                        Ok(output) => ToolOutput {
                            output,
                            is_error: false,
                        },
                        Err(e) => ToolOutput::error(format!("the tool's result is not JSON: {e}")),
                    },
                    Err(message) => ToolOutput::error(message),
                }
            })
        };
        RustTool {
            spec: ToolSpec {
                name: name.into(),
                description: description.into(),
                input_schema: schema,
                read_only: false,
                needs_approval: Approval::Never,
            },
            handler: Arc::new(run),
        }
    }

    /// Marks the tool safe to run in dry-run sessions.
    pub fn read_only(mut self) -> RustTool {
        self.spec.read_only = true;
        self
    }

    /// Every call waits for a human's approval.
    pub fn needs_approval(mut self) -> RustTool {
        self.spec.needs_approval = Approval::Always;
        self
    }

    /// Calls whose input matches `schema` wait for a human's approval.
    pub fn needs_approval_when(mut self, schema: Value) -> RustTool {
        self.spec.needs_approval = Approval::When(schema);
        self
    }

    /// Shares the tool.
    pub fn into_dyn(self) -> Arc<dyn DynTool> {
        Arc::new(self)
    }
}

impl DynTool for RustTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(&self, input: Value, ctx: ToolContext) -> ToolFuture {
        (self.handler)(input, ctx)
    }
}

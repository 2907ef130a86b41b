//! sea-orm entities of scheduler-service's tables.

pub mod scheduled_tasks;
pub mod task_executions;

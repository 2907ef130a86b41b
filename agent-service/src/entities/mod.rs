//! sea-orm entities of agent-service, one file per table of its migrations (the outbox's is
//! `docchat_common::outbox::entity`). Rows that belong to a user are reached through
//! [`Owned`], so a query cannot forget whose they are; JSON kept in TEXT columns is typed by
//! [`JsonText`], so a row that does not decode is an error, never a default.

pub mod agent_keys;
pub mod custom_agent_key_associations;
pub mod custom_agent_tool_associations;
pub mod custom_agents;
pub mod custom_tools;
pub mod run_leases;
pub mod session_deletions;
pub mod session_workspaces;
pub mod tool_preferences;
pub mod workspace_files;

use sea_orm::sea_query::{ArrayType, ColumnType, ValueType, ValueTypeErr};
use sea_orm::{
    ColIdx, ColumnTrait, DbErr, DeleteMany, EntityTrait, QueryFilter, QueryResult, Select,
    TryGetError, TryGetable, UpdateMany, Value,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// An entity whose rows belong to one user: every finder, update and delete here is
/// filtered by the owner (svix's `secure_find`), so another user's row simply is not there.
pub trait Owned: EntityTrait {
    /// The column holding the owner's user id.
    fn owner_column() -> Self::Column;

    /// The column holding the row's id.
    fn id_column() -> Self::Column;

    /// The rows of `owner`.
    fn find_by_owner(owner: &str) -> Select<Self> {
        Self::find().filter(Self::owner_column().eq(owner))
    }

    /// The row `id` if it is `owner`'s.
    fn find_owned(owner: &str, id: &str) -> Select<Self> {
        Self::find_by_owner(owner).filter(Self::id_column().eq(id))
    }

    /// An update of `owner`'s rows (filter it further).
    fn update_by_owner(owner: &str) -> UpdateMany<Self> {
        Self::update_many().filter(Self::owner_column().eq(owner))
    }

    /// An update of the row `id` if it is `owner`'s.
    fn update_owned(owner: &str, id: &str) -> UpdateMany<Self> {
        Self::update_by_owner(owner).filter(Self::id_column().eq(id))
    }

    /// A deletion of `owner`'s rows (filter it further).
    fn delete_by_owner(owner: &str) -> DeleteMany<Self> {
        Self::delete_many().filter(Self::owner_column().eq(owner))
    }

    /// A deletion of the row `id` if it is `owner`'s.
    fn delete_owned(owner: &str, id: &str) -> DeleteMany<Self> {
        Self::delete_by_owner(owner).filter(Self::id_column().eq(id))
    }
}

/// A JSON value of type `T` kept in a TEXT column (as the migrations made them): written as
/// its JSON text, read back by decoding it. A stored text that does not decode as `T` is a
/// database error ([`DbErr::Json`]), not a default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JsonText<T>(pub T);

impl<T: Serialize> From<JsonText<T>> for Value {
    fn from(v: JsonText<T>) -> Value {
        match serde_json::to_string(&v.0) {
            Ok(text) => Value::String(Some(Box::new(text))),
            Err(e) => {
                // Written as NULL, which the NOT NULL column refuses: the write fails.
                tracing::error!(error = %e, "a value for a JSON column does not encode");
                Value::String(None)
            }
        }
    }
}

impl<T: DeserializeOwned> TryGetable for JsonText<T> {
    fn try_get_by<I: ColIdx>(res: &QueryResult, index: I) -> Result<Self, TryGetError> {
        let text = String::try_get_by(res, index)?;
        decode(&text).map_err(|e| {
            TryGetError::DbErr(DbErr::Json(format!(
                "column {index:?} does not hold a {}: {e}",
                std::any::type_name::<T>()
            )))
        })
    }
}

impl<T: DeserializeOwned> ValueType for JsonText<T> {
    fn try_from(v: Value) -> Result<Self, ValueTypeErr> {
        match v {
            Value::String(Some(text)) => decode(&text).map_err(|_| ValueTypeErr),
            _ => Err(ValueTypeErr),
        }
    }

    fn type_name() -> String {
        format!("JsonText<{}>", std::any::type_name::<T>())
    }

    fn array_type() -> ArrayType {
        ArrayType::String
    }

    fn column_type() -> ColumnType {
        ColumnType::Text
    }
}

fn decode<T: DeserializeOwned>(text: &str) -> Result<JsonText<T>, serde_json::Error> {
    serde_json::from_str(text).map(JsonText)
}

#[cfg(test)]
mod tests {
    use super::JsonText;
    use sea_orm::Value;
    use sea_orm::sea_query::ValueType;

    #[test]
    fn json_text_round_trips_and_refuses_what_does_not_decode() {
        let v: Value = JsonText(vec!["a".to_owned(), "b".to_owned()]).into();
        assert_eq!(v, Value::String(Some(Box::new(r#"["a","b"]"#.to_owned()))));
        assert_eq!(
            <JsonText<Vec<String>> as ValueType>::try_from(v).ok(),
            Some(JsonText(vec!["a".to_owned(), "b".to_owned()]))
        );
        let bad = Value::String(Some(Box::new("not json".to_owned())));
        assert!(<JsonText<Vec<String>> as ValueType>::try_from(bad).is_err());
    }
}

//! Users, API keys, roles, groups and permissions.

mod bootstrap;
mod keys;
mod lockout;
mod roles;
mod users;

pub use bootstrap::bootstrap;
pub use keys::{KeyChange, authenticate, create_key, delete_key, list_keys, update_key};
pub use lockout::key_works_at;
pub use roles::{
    assign_permission, create_role, find_role, list_roles, remove_permission, set_role_priority,
};
pub use users::{
    Identity, UserView, create_user, find_by_username, find_user, identity_of, list_users,
    set_user_roles, user_roles_by_priority, user_view,
};

const ADMIN_ROLE: &str = "admin";
const USER_ROLE: &str = "user";
const ADMIN_USERNAME: &str = "admin";

fn new_id() -> String {
    docchat_common::ids::new_id()
}

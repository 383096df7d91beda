"""Generated from proto/contextengine/v1 by scripts/gen_proto.sh. DO NOT EDIT."""

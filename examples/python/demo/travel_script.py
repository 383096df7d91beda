"""The script the demo plays: a travel-planning conversation, one :class:`Turn` per invocation.

Each turn is the user's message, the tools the agent calls (one model call each, with the
result the fake tool returns) and the agent's final answer. Data only, so ``demo.py`` stays
about the engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["SCRIPT", "ToolCall", "Turn", "turn_for"]


@dataclass(frozen=True)
class ToolCall:
    """One tool round: the call the model makes (name, arguments) and what the tool returns."""

    name: str
    args: Mapping[str, Any]
    result: Mapping[str, Any]


@dataclass(frozen=True)
class Turn:
    """One invocation: the user's message, the tools the agent calls (one model call each) and
    its answer."""

    user: str
    tools: tuple[ToolCall, ...]
    answer: str


def _flights(origin: str, destination: str, date: str) -> list[dict[str, Any]]:
    return [
        {"flight": "AF274", "depart": f"{date} 10:20", "arrive": "+1 06:05", "stops": 0,
         "price_eur": 1240, "seats_left": 4},
        {"flight": "LH2231", "depart": f"{date} 07:55", "arrive": "+1 08:40", "stops": 1,
         "via": "FRA", "price_eur": 965, "seats_left": 9},
        {"flight": "NH216", "depart": f"{date} 21:55", "arrive": "+1 17:30", "stops": 0,
         "price_eur": 1385, "seats_left": 2},
    ]  # fmt: skip


SCRIPT: tuple[Turn, ...] = (
    Turn(
        "I want to fly from Paris to Tokyo on May 12 with my partner, economy. What is there?",
        (
            ToolCall(
                "search_flights",
                {
                    "origin": "CDG",
                    "destination": "HND",
                    "date": "2026-05-12",
                    "passengers": 2,
                    "cabin": "economy",
                },
                {"flights": _flights("CDG", "HND", "2026-05-12")},
            ),
        ),
        "I found three options for May 12: Air France AF274 (nonstop, 10:20, 1,240 EUR per "
        "person), Lufthansa LH2231 via Frankfurt (965 EUR, one stop) and ANA NH216 (nonstop "
        "night flight, 1,385 EUR). AF274 is the best balance of price and comfort.",
    ),
    Turn(
        "Book AF274 for both of us, please.",
        (
            ToolCall(
                "book_flight",
                {"flight": "AF274", "date": "2026-05-12", "passengers": 2},
                {
                    "status": "confirmed",
                    "booking_reference": "PNR-7XK2Q",
                    "total_eur": 2480,
                    "seats": ["23A", "23B"],
                },
            ),
        ),
        "Done: AF274 on May 12 is booked for two, seats 23A and 23B, booking reference "
        "PNR-7XK2Q, 2,480 EUR in total.",
    ),
    Turn(
        "Now a hotel in Shinjuku for 5 nights from May 13, under 200 euros a night.",
        (
            ToolCall(
                "search_hotels",
                {
                    "city": "Tokyo",
                    "district": "Shinjuku",
                    "check_in": "2026-05-13",
                    "nights": 5,
                    "max_price_eur": 200,
                },
                {
                    "hotels": [
                        {
                            "name": "Hotel Gracery Shinjuku",
                            "price_eur": 165,
                            "rating": 4.3,
                            "walk_to_station_min": 5,
                        },
                        {
                            "name": "Keio Plaza",
                            "price_eur": 198,
                            "rating": 4.4,
                            "walk_to_station_min": 4,
                        },
                        {
                            "name": "Citadines Shinjuku",
                            "price_eur": 142,
                            "rating": 4.1,
                            "walk_to_station_min": 9,
                        },
                    ]
                },
            ),
        ),
        "Three hotels fit: Hotel Gracery Shinjuku (165 EUR, rated 4.3, 5 minutes from the "
        "station), Keio Plaza (198 EUR, 4.4) and Citadines Shinjuku (142 EUR, 4.1, a longer "
        "walk). Gracery is the best value.",
    ),
    Turn(
        "What will the weather be like that week?",
        (
            ToolCall(
                "get_weather_forecast",
                {"city": "Tokyo", "start": "2026-05-13", "days": 5},
                {
                    "forecast": [
                        {"day": "2026-05-13", "high_c": 23, "low_c": 15, "rain_pct": 10},
                        {"day": "2026-05-14", "high_c": 24, "low_c": 16, "rain_pct": 20},
                        {"day": "2026-05-15", "high_c": 21, "low_c": 15, "rain_pct": 70},
                        {"day": "2026-05-16", "high_c": 22, "low_c": 14, "rain_pct": 30},
                        {"day": "2026-05-17", "high_c": 25, "low_c": 16, "rain_pct": 0},
                    ]
                },
            ),
        ),
        "Mild and mostly dry: 21-25 C by day, around 15 C at night. May 15 looks rainy (70%), "
        "so keep indoor plans, like the museums in Ueno, for that day.",
    ),
    Turn(
        "Could we do a day trip to Kyoto on the 16th?",
        (
            ToolCall(
                "search_trains",
                {
                    "origin": "Tokyo",
                    "destination": "Kyoto",
                    "date": "2026-05-16",
                    "passengers": 2,
                    "return": True,
                },
                {
                    "trains": [
                        {
                            "train": "Nozomi 1",
                            "depart": "06:00",
                            "arrive": "08:15",
                            "price_eur": 92,
                        },
                        {
                            "train": "Nozomi 7",
                            "depart": "07:30",
                            "arrive": "09:42",
                            "price_eur": 92,
                        },
                    ],
                    "last_return": "Nozomi 64 at 21:24",
                },
            ),
        ),
        "Yes: the Nozomi 7 leaves Tokyo at 07:30 and reaches Kyoto at 09:42 (92 EUR each way "
        "per person); the last train back is the Nozomi 64 at 21:24.",
    ),
    Turn(
        "Book the Hotel Gracery for those 5 nights.",
        (
            ToolCall(
                "book_hotel",
                {
                    "hotel": "Hotel Gracery Shinjuku",
                    "check_in": "2026-05-13",
                    "nights": 5,
                    "guests": 2,
                },
                {
                    "status": "confirmed",
                    "confirmation": "GRC-55812",
                    "total_eur": 825,
                    "breakfast": False,
                },
            ),
        ),
        "The Hotel Gracery Shinjuku is booked from May 13 for 5 nights, confirmation "
        "GRC-55812, 825 EUR in total (breakfast not included).",
    ),
    Turn(
        "Do we need a visa? We are both French citizens.",
        (
            ToolCall(
                "lookup_entry_rules",
                {"destination": "JP", "nationality": "FR", "purpose": "tourism"},
                {
                    "visa_required": False,
                    "max_stay_days": 90,
                    "passport_validity": "valid for the whole stay",
                    "notes": "Visit Japan Web registration recommended before arrival",
                },
            ),
        ),
        "No visa needed: French citizens can stay up to 90 days as tourists. Your passports "
        "must be valid for the whole stay, and registering on Visit Japan Web before you fly "
        "speeds up arrival.",
    ),
    Turn(
        "Great. Can you recap the plan and the total cost so far?",
        (),
        "Your plan: AF274 Paris to Tokyo on May 12 (PNR-7XK2Q, 2,480 EUR), Hotel Gracery "
        "Shinjuku May 13-18 (GRC-55812, 825 EUR), an optional Kyoto day trip on May 16 "
        "(about 368 EUR for two, not booked). Booked so far: 3,305 EUR.",
    ),
    Turn(
        "Any sushi restaurants near the hotel for our first evening?",
        (
            ToolCall(
                "search_restaurants",
                {
                    "near": "Hotel Gracery Shinjuku",
                    "cuisine": "sushi",
                    "date": "2026-05-13",
                    "party_size": 2,
                },
                {
                    "restaurants": [
                        {
                            "name": "Sushi Zanmai Shinjuku",
                            "walk_min": 3,
                            "price_level": 2,
                            "free_tables": ["19:00", "20:30"],
                        },
                        {
                            "name": "Uogashi Nihon-ichi",
                            "walk_min": 6,
                            "price_level": 1,
                            "standing_only": True,
                        },
                    ]
                },
            ),
        ),
        "Sushi Zanmai Shinjuku is 3 minutes from the hotel with tables at 19:00 and 20:30; "
        "Uogashi Nihon-ichi is a cheaper standing sushi bar 6 minutes away.",
    ),
    Turn(
        "Please move our return to May 19 and find flights back to Paris.",
        (
            ToolCall(
                "search_flights",
                {
                    "origin": "HND",
                    "destination": "CDG",
                    "date": "2026-05-19",
                    "passengers": 2,
                    "cabin": "economy",
                },
                {"flights": _flights("HND", "CDG", "2026-05-19")},
            ),
            ToolCall(
                "extend_hotel",
                {"confirmation": "GRC-55812", "extra_nights": 1},
                {"status": "confirmed", "new_check_out": "2026-05-19", "total_eur": 990},
            ),
        ),
        "The hotel now runs to May 19 (GRC-55812, 990 EUR in total). For the way back on May "
        "19 the options mirror the outbound ones: AF274-style nonstop at 1,240 EUR, LH2231 via "
        "Frankfurt at 965 EUR, or NH216 at 1,385 EUR.",
    ),
)


def turn_for(index: int) -> Turn:
    """The script's turn ``index`` (0-based); past its end the script starts over."""
    turn = SCRIPT[index % len(SCRIPT)]
    rounds = index // len(SCRIPT)
    if rounds == 0:
        return turn
    return Turn(f"{turn.user} (again, round {rounds + 1})", turn.tools, turn.answer)

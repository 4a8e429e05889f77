"""A one-conversation LoCoMo slice written here (the real data set is never copied), shared by
the evaluation's tests."""

from __future__ import annotations


def conversation(sample_id: str = "conv-t") -> dict:
    """Two dated sessions of small talk with facts to find, three questions with evidence and
    one adversarial question."""
    turns1 = [
        ("Ann", "I adopted a cat named Miso from the shelter last week."),
        ("Bo", "That is lovely! What colour is Miso?"),
        ("Ann", "She is grey with white paws."),
        ("Bo", "I started a pottery class on Tuesdays."),
    ]
    turns2 = [
        ("Ann", "Miso learned to open the kitchen doors."),
        ("Bo", "My pottery teacher praised my first bowl."),
        ("Ann", "We are going camping at Lake Tahoe in July."),
    ]
    return {
        "sample_id": sample_id,
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "10:00 am on 1 May, 2023",
            "session_1": [
                {"speaker": s, "dia_id": f"D1:{i}", "text": t} for i, (s, t) in enumerate(turns1, 1)
            ],
            "session_2_date_time": "6:30 pm on 20 June, 2023",
            "session_2": [
                {"speaker": s, "dia_id": f"D2:{i}", "text": t} for i, (s, t) in enumerate(turns2, 1)
            ],
        },
        "qa": [
            {
                "question": "What is the name of Ann's cat?",
                "answer": "Miso",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "Where is Ann going camping?",
                "answer": "Lake Tahoe",
                "evidence": ["D2:3"],
                "category": 4,
            },
            {
                "question": "What class does Bo take?",
                "answer": "pottery",
                "evidence": ["D1:4", "D2:2"],
                "category": 1,
            },
            {"question": "What did Bo's cat learn?", "evidence": ["D2:1"], "category": 5},
        ],
    }
